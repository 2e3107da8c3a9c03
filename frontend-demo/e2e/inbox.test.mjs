// The approvals inbox in a real headless Chromium, two users at once:
//   TOOLGATE_BIN=target/debug/toolgate node --test e2e/
// This file starts its own toolgate (TOOLGATE_BIN) that takes the user
// from an `X-User` header, as a proxy in front of it would set it, and
// whose payments need a finance approver (four eyes). Each browser
// profile sends its own user's header with every request. A page error or
// a console.error fails the flow at once, with the message.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { chatAudit, launchChromium, serveToolgate, watchedFlow } from './harness.mjs';

const ARTIFACTS = process.env.TOOLGATE_E2E_ARTIFACTS ?? join(import.meta.dirname, 'artifacts');
mkdirSync(ARTIFACTS, { recursive: true });
const TIMEOUT = 15_000;

const CONFIG = `
store: {kind: memory}
auth:
  principalHeader: X-User
  roles: {finance: [boss]}
toolConfirmation:
  timeout: 300000
  tools:
    process_payment: {approvers: ["role:finance"], requireDistinctApprover: true, editable: true}
`;

let browser;
let stopToolgate;
let server;

before(async () => {
  let url;
  ({ url, stop: stopToolgate } = await serveToolgate(CONFIG));
  server = url;
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  stopToolgate?.();
});

/** A fresh profile of `user`'s (every request says `X-User: user`), the page at `path`. */
async function open(t, problem, user, path) {
  const context = await browser.newContext({ extraHTTPHeaders: { 'x-user': user } });
  t.after(() => context.close());
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on('pageerror', (e) => problem(context, `${user}'s page error: ${e.stack ?? e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problem(context, `${user}'s console.error: ${m.text()}`);
  });
  await page.goto(server + path);
  await page.getByRole('heading', { name: 'toolgate' }).waitFor();
  return page;
}

/** A flow whose page errors fail it at once: `body` gets `open(user, path)`. */
const flow = (name, body) => watchedFlow(name, open, body);

const shot = (page, name) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });

flow("inbox: a clerk's payment waits; the approver sees it arrive live, approves it, and it leaves", async (open) => {
  const boss = await open('boss', '/#approvals');
  await boss.getByRole('heading', { name: 'Approvals' }).waitFor();
  await boss.getByText(/^Live/).waitFor();
  await boss.getByText('Nothing waits for you.').waitFor();

  const clerk = await open('clerk', '/');
  await clerk.getByLabel('Message').fill('Send 50 USD to Hanako');
  await clerk.getByLabel('Message').press('Enter');
  const card = clerk.getByTestId('approval-card');
  await card.waitFor();
  // The clerk may not approve their own payment: the card says who must.
  await card.getByText('Waiting for approval by role:finance', { exact: true }).waitFor();
  assert.equal(await card.getByRole('button', { name: 'Approve', exact: true }).count(), 0);
  assert.equal(await card.getByRole('button', { name: 'Deny…' }).count(), 1);
  await shot(clerk, 'inbox-1-clerk-waits');

  // It arrives in the approver's inbox without a reload.
  const item = boss.getByTestId('inbox-item');
  await item.waitFor();
  assert.match(await item.getByRole('heading').innerText(), /process_payment for clerk/);
  assert.match(await item.locator('dl').innerText(), /Amount\s+50 USD\s+Recipient\s+Hanako/);
  assert.match(await item.getByRole('timer').innerText(), /Decide within \d+:\d\d/);
  // The approver sees the call's fingerprint, the one the clerk's card shows
  // and the API has for the question.
  const shown = item.getByTestId('fingerprint');
  const call = (await shown.getAttribute('title')) ?? '';
  assert.match(call, /^[0-9a-f]{64}$/);
  assert.equal(await shown.innerText(), `Fingerprint ${call.slice(0, 12)}`);
  await card.getByTestId('fingerprint').waitFor();
  assert.equal(await card.getByTestId('fingerprint').getAttribute('title'), call);
  const api = await clerk.evaluate(async () => {
    const chat = JSON.parse(localStorage.getItem('toolgate-demo:chat'));
    const [open] = await (await fetch(`/api/confirmations?chatId=${chat}`)).json();
    return (await (await fetch(`/api/confirmations/${encodeURIComponent(open.id)}`)).json()).fingerprint.call;
  });
  assert.equal(api, call);
  await shot(boss, 'inbox-2-approver-sees-it');

  await item.getByLabel(/Reason/).fill('checked the invoice');
  await item.getByRole('button', { name: 'Approve', exact: true }).click();
  await boss.getByText('Nothing waits for you.').waitFor();
  assert.equal(await boss.getByTestId('inbox-item').count(), 0);
  await shot(boss, 'inbox-3-approved');

  // The clerk's card learns at once that it was decided elsewhere, and how.
  await card.getByText('process_payment was approved later and ran.').waitFor();
  await shot(clerk, 'inbox-4-clerk-card-closed');

  // The clerk's audit log says who approved it.
  const approvals = (await chatAudit(clerk))
    .filter((event) => event.decision === 'approved')
    .map((event) => event.by);
  assert.deepEqual(approvals, ['boss through the API']);

  // The clerk writes on; the next answer brings the outcome into the chat.
  await clerk.getByLabel('Message').fill('What is the weather in Paris?');
  await clerk.getByLabel('Message').press('Enter');
  const later = clerk.getByTestId('later-outcome');
  await later.waitFor();
  assert.match(await later.innerText(), /process_payment was approved later and ran\./);
  await shot(clerk, 'inbox-5-clerk-learns-the-outcome');
});
