// The demo in a real headless Chromium against a running toolgate:
//   TOOLGATE_URL=http://127.0.0.1:8080 node --test e2e/
// The server should run tests/fixtures/browser/toolgate.yaml (the
// scripted model, payments editable, a 5-minute deadline); tests/it/browser.rs
// starts one and runs this file. Screenshots of each state go to
// TOOLGATE_E2E_ARTIFACTS (default e2e/artifacts/). A page error or a
// console.error fails a flow at once, with the message.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { CHROMIUM, chatAudit, launchChromium, watchedFlow } from './harness.mjs';

const URL = process.env.TOOLGATE_URL;
assert.ok(URL, 'set TOOLGATE_URL to a running toolgate');
const ARTIFACTS = process.env.TOOLGATE_E2E_ARTIFACTS ?? join(import.meta.dirname, 'artifacts');
mkdirSync(ARTIFACTS, { recursive: true });
const TIMEOUT = 15_000;

let browser;
before(async () => {
  browser = await launchChromium();
  // Browsers change under the tests (Debian upgrades Chromium): say which ran.
  console.log(`browser: Chromium ${browser.version()} (${CHROMIUM})`);
});
after(async () => {
  await browser?.close();
});

/** A browser flow: `body` gets `open(options)` for its pages. */
const flow = (name, body) => watchedFlow(name, open, body);

/**
 * A fresh profile (so a fresh chat) with the page open and watched;
 * `allow`: the console errors the flow causes on purpose.
 */
async function open(t, problem, { viewport = { width: 1000, height: 900 }, allow = [] } = {}) {
  const context = await browser.newContext({ viewport });
  t.after(() => context.close());
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  const requests = [];
  const sockets = [];
  page.on('request', (r) => requests.push(`${r.method()} ${new globalThis.URL(r.url()).pathname}`));
  page.on('websocket', (ws) => sockets.push(new globalThis.URL(ws.url()).pathname));
  page.on('pageerror', (e) => problem(context, `page error: ${e.stack ?? e.message}`));
  page.on('console', (m) => {
    if (m.type() !== 'error' || allow.some((expected) => expected.test(m.text()))) return;
    const { url, lineNumber } = m.location();
    problem(context, `console.error: ${m.text()}${url ? ` (${url}:${lineNumber})` : ''}`);
  });
  await page.goto(URL);
  await page.getByRole('heading', { name: 'toolgate' }).waitFor();
  return { page, requests, sockets };
}

async function say(page, text) {
  await page.getByLabel('Message').fill(text);
  await page.getByLabel('Message').press('Enter');
}

const shot = (page, name) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
const cards = (page) => page.getByTestId('approval-card');
const payment = (page) => page.getByTestId('tool-process_payment');
const assistantSays = (page, text) =>
  page.locator('.message.assistant .text', { hasText: text }).first().waitFor();
const posts = (requests) => requests.filter((r) => r === 'POST /stream').length;
/** The page's reads of one question (`GET /api/confirmations/{id}`). */
const questionReads = (requests) =>
  requests.filter((r) => /^GET \/api\/confirmations\/[^/]+$/.test(r) && r !== 'GET /api/confirmations/events');

/**
 * The call fingerprint the card shows (short, the whole in its title),
 * checked against what the API has for the chat's one open question: its
 * listing and `GET /api/confirmations/{id}`.
 */
async function cardFingerprint(page, card) {
  const shown = card.getByTestId('fingerprint');
  await shown.waitFor();
  const call = (await shown.getAttribute('title')) ?? '';
  assert.match(call, /^[0-9a-f]{64}$/);
  assert.equal(await shown.innerText(), `Fingerprint ${call.slice(0, 12)}`);
  const api = await page.evaluate(async () => {
    const chat = JSON.parse(localStorage.getItem('toolgate-demo:chat'));
    const open = await (await fetch(`/api/confirmations?chatId=${chat}`)).json();
    const one = await (await fetch(`/api/confirmations/${encodeURIComponent(open[0].id)}`)).json();
    return { open: open.length, listed: open[0].fingerprint.call, one: one.fingerprint.call };
  });
  assert.deepEqual(api, { open: 1, listed: call, one: call });
  return call;
}

flow('approve: the card shows the payment, the hint and the deadline; the result streams in', async (open) => {
  const { page, requests } = await open();
  await say(page, 'Send 50 USD to Hanako');
  const card = cards(page);
  await card.waitFor();
  assert.match(await card.innerText(), /Approve process_payment\?/);
  assert.match(await card.innerText(), /Send 50 USD to Hanako\?/);
  assert.match(await card.locator('dl').innerText(), /Amount\s+50 USD\s+Recipient\s+Hanako/);
  const left = (await card.getByRole('timer').innerText()).match(/Answer within (\d+):(\d\d)/);
  assert.ok(left && Number(left[1]) * 60 + Number(left[2]) <= 300, 'a countdown from the 5-minute timeout');
  // The stream does not carry the fingerprint: the card read it once from the API.
  await card.getByTestId('fingerprint').waitFor();
  assert.equal(questionReads(requests).length, 1, questionReads(requests).join());
  const fingerprint = await cardFingerprint(page, card);
  await shot(page, 'approve-1-card');

  await card.getByRole('button', { name: 'Approve', exact: true }).click();
  await payment(page).and(page.locator('[data-state="output-available"]')).waitFor();
  assert.match(await payment(page).getByLabel('result').innerText(), /"status": "completed"/);
  await assistantSays(page, /Sent 50 USD to Hanako \(transaction tx-/);
  assert.equal(await cards(page).count(), 0);
  assert.match(await page.getByTestId('answered').innerText(), /You approved process_payment/);
  assert.equal(posts(requests), 2, 'the question, then the answer');
  // The audit log's approval names the call the card showed.
  const approved = (await chatAudit(page))
    .filter((event) => event.decision === 'approved')
    .map((event) => event.fingerprint);
  assert.deepEqual(approved, [fingerprint]);
  await shot(page, 'approve-2-result');
});

flow('deny with a reason: the tool never runs and the model is told why', async (open) => {
  const { page } = await open();
  await say(page, 'Pay 20 EUR to Taro');
  const card = cards(page);
  await card.getByRole('button', { name: 'Deny…' }).click();
  await card.getByLabel('Reason').fill('not today');
  await shot(page, 'deny-1-reason');
  await card.getByRole('button', { name: 'Deny', exact: true }).click();

  await payment(page).and(page.locator('[data-state="output-error"]')).waitFor();
  assert.match(await payment(page).getByRole('alert').innerText(), /User denied execution: not today/);
  await assistantSays(page, /denied: .*not today/);
  assert.match(await page.getByTestId('answered').innerText(), /You denied process_payment: not today/);
  // The audit log says the user rejected it, and nothing approved it.
  const decisions = (await chatAudit(page)).map((event) => event.decision);
  assert.ok(decisions.includes('rejected'), decisions.join());
  assert.ok(!decisions.includes('approved'), decisions.join());
  await shot(page, 'deny-2-result');
});

flow('a call the policy denies: no card, the error on the tool part', async (open) => {
  const { page } = await open();
  await say(page, 'Send 9000 USD to Hanako');
  const failed = payment(page).and(page.locator('[data-state="output-error"]'));
  await failed.waitFor();
  assert.match(
    await failed.getByRole('alert').innerText(),
    /denied by policy: payments over 5000 need a bank transfer/,
  );
  await assistantSays(page, /denied/);
  assert.equal(await cards(page).count(), 0);
  await shot(page, 'policy-denied');
});

flow('two payments at once: two cards, one answer request once both are decided', async (open) => {
  const { page, requests } = await open();
  await say(page, 'Send 10 USD to Hanako and send 20 USD to Taro');
  await cards(page).nth(1).waitFor();
  assert.equal(await cards(page).count(), 2);
  await shot(page, 'two-1-cards');

  const taro = cards(page).filter({ hasText: 'Taro' });
  const hanako = cards(page).filter({ hasText: 'Hanako' });
  await hanako.getByRole('button', { name: 'Approve', exact: true }).click();
  await page.getByTestId('answered').waitFor();
  assert.equal(await cards(page).count(), 1, 'the other question stays open');
  assert.equal(posts(requests), 1, 'nothing is sent while a question is open');
  await taro.getByRole('button', { name: 'Deny…' }).click();
  await taro.getByLabel('Reason').fill('wrong person');
  await taro.getByRole('button', { name: 'Deny', exact: true }).click();

  const done = payment(page).and(page.locator('[data-state="output-available"]'));
  const denied = payment(page).and(page.locator('[data-state="output-error"]'));
  await done.waitFor();
  await denied.waitFor();
  assert.match(await done.innerText(), /Hanako/);
  assert.match(await denied.innerText(), /Taro[\s\S]*User denied execution: wrong person/);
  assert.equal(posts(requests), 2);
  await shot(page, 'two-2-results');
});

flow('reload while a card is pending: the card comes back and still works', async (open) => {
  const { page } = await open();
  await say(page, 'Send 30 USD to Hanako');
  await cards(page).waitFor();
  await page.reload();
  const card = cards(page);
  await card.waitFor();
  assert.match(await card.innerText(), /30 USD/);
  await card.getByRole('timer').waitFor();
  await shot(page, 'reload-1-card-restored');

  await card.getByRole('button', { name: 'Approve', exact: true }).click();
  await assistantSays(page, /Sent 30 USD to Hanako/);
  await shot(page, 'reload-2-result');
});

flow('WebSocket mode: the whole flow over /live, no POST at all', async (open) => {
  const { page, requests, sockets } = await open();
  await page.getByLabel('Transport').selectOption('ws');
  await say(page, 'Send 40 USD to Taro');
  const card = cards(page);
  await card.waitFor();
  await shot(page, 'websocket-1-card');
  await card.getByRole('button', { name: 'Approve', exact: true }).click();
  await assistantSays(page, /Sent 40 USD to Taro/);
  assert.deepEqual([...new Set(sockets)], ['/live']);
  assert.equal(posts(requests), 0);
  await shot(page, 'websocket-2-result');
});

flow('AI SDK approvals: the native card, approved and denied', async (open) => {
  const { page } = await open();
  await page.getByLabel('Confirmation').selectOption('ai-sdk');
  await say(page, 'Send 15 USD to Hanako');
  const card = cards(page);
  await card.waitFor();
  assert.equal(await card.getByLabel('Ask again').count(), 0, 'native answers cannot remember');
  assert.equal(await card.getByRole('button', { name: 'Edit…' }).count(), 0, 'nor carry edits');
  // A native card's question is its approval's id: the same fingerprint as the API's.
  await cardFingerprint(page, card);
  await shot(page, 'native-1-card');
  await card.getByRole('button', { name: 'Approve', exact: true }).click();
  await assistantSays(page, /Sent 15 USD to Hanako/);

  await say(page, 'Send 16 USD to Taro');
  await cards(page).getByRole('button', { name: 'Deny…' }).click();
  await cards(page).getByLabel('Reason').fill('no');
  await cards(page).getByRole('button', { name: 'Deny', exact: true }).click();
  await payment(page).and(page.locator('[data-state="output-denied"]')).waitFor();
  await assistantSays(page, /denied/);
  await shot(page, 'native-2-results');
  // What an approval component (AI Elements' Confirmation) reads from each
  // tool part once the turn is over: its state, and the approval with the
  // answer and the reason (docs/guides/frontends.md).
  const parts = await page.waitForFunction(() => {
    const chat = JSON.parse(localStorage.getItem('toolgate-demo:chat'));
    const messages = JSON.parse(localStorage.getItem(`toolgate-demo:messages:${chat}`) ?? '[]');
    const found = messages
      .flatMap((m) => m.parts)
      .filter((p) => p.type === 'tool-process_payment')
      .map(({ state, approval }) => ({ state, approved: approval?.approved, reason: approval?.reason, id: approval?.id }));
    return found.length === 2 && found[1].state === 'output-denied' ? found : undefined;
  });
  const [approved, denied] = await parts.jsonValue();
  assert.match(approved.id, /^approval-/);
  assert.match(denied.id, /^approval-/);
  assert.deepEqual({ ...approved, id: undefined }, { state: 'output-available', approved: true, reason: undefined, id: undefined });
  assert.deepEqual({ ...denied, id: undefined }, { state: 'output-denied', approved: false, reason: 'no', id: undefined });
});

flow('edited arguments run as edited; remember skips the next question', async (open) => {
  const { page } = await open();
  await say(page, 'Send 50 USD to Hanako');
  const card = cards(page);
  await card.getByRole('button', { name: 'Edit…' }).click();
  await card.getByLabel('amount').fill('25');
  await shot(page, 'edit-1-form');
  await card.getByRole('button', { name: 'Approve with these arguments' }).click();
  await assistantSays(page, /Sent 25 USD to Hanako/);

  await say(page, 'Send 5 USD to Taro');
  await cards(page).getByLabel('Ask again').selectOption('session');
  await cards(page).getByRole('button', { name: 'Approve', exact: true }).click();
  await assistantSays(page, /Sent 5 USD to Taro/);
  await say(page, 'Send 6 USD to Taro');
  await assistantSays(page, /Sent 6 USD to Taro/);
  assert.equal(await cards(page).count(), 0, 'remembered for this chat: not asked again');
  await shot(page, 'edit-2-remembered');
});

flow('keyboard and phone width: the flow without a mouse, nothing wider than the screen', async (open) => {
  const { page } = await open({ viewport: { width: 375, height: 740 } });
  await page.getByLabel('Message').focus();
  await page.keyboard.type('Send 12 USD to Hanako');
  await page.keyboard.press('Enter');
  const card = cards(page);
  await card.waitFor();
  // Tab from the remember choice to Approve, and press it.
  await card.getByLabel('Ask again').focus();
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Approve');
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the page is ${overflow}px wider than a phone`);
  await shot(page, 'phone-1-card');
  await page.keyboard.press('Enter');
  await assistantSays(page, /Sent 12 USD to Hanako/);
  await shot(page, 'phone-2-result');
});

flow('a failed answer is not lost: the error is shown and Retry sends it', async (open) => {
  // Chromium reports the aborted request; nothing else may go wrong.
  const { page, requests } = await open({ allow: [/^Failed to load resource: net::ERR_FAILED$/] });
  await say(page, 'Send 70 USD to Taro');
  await cards(page).waitFor();
  await page.route('**/stream', (route) => route.abort(), { times: 1 });
  await cards(page).getByRole('button', { name: 'Approve', exact: true }).click();
  const banner = page.locator('.banner');
  await banner.getByRole('button', { name: 'Retry' }).waitFor();
  await shot(page, 'retry-1-error');
  await banner.getByRole('button', { name: 'Retry' }).click();
  await assistantSays(page, /Sent 70 USD to Taro/);
  assert.equal(await banner.count(), 0);
  assert.equal(posts(requests), 3, 'the question, the failed answer, the retry');
  await shot(page, 'retry-2-result');
});

flow('a card the chat went past cannot be answered any more', async (open) => {
  const { page } = await open();
  await say(page, 'Send 80 USD to Hanako');
  await cards(page).waitFor();
  await say(page, 'What is the weather in Tokyo?');
  await page.locator('.message.assistant .text', { hasText: /Tokyo/ }).waitFor();
  assert.equal(await cards(page).count(), 0);
  await page.getByText('Not answered: the chat went on without it.').waitFor();
  await shot(page, 'left-behind');
});

flow('client-side tools: one the page runs, one the user answers after approving', async (open) => {
  const { page } = await open();
  await say(page, 'use browser_time');
  await assistantSays(page, /browser_time returned .*timeZone/);

  await say(page, 'use pick_color');
  const card = cards(page);
  await card.getByRole('button', { name: 'Approve', exact: true }).click();
  const box = page.getByTestId('client-tool');
  await box.getByLabel('Result (JSON)').fill('{"color": "teal"}');
  await shot(page, 'client-1-result');
  await box.getByRole('button', { name: 'Send result' }).click();
  await assistantSays(page, /pick_color returned .*teal/);
  await shot(page, 'client-2-answer');
});
