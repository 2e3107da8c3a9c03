// The approvals inbox in a real headless Chromium, two users at once:
//   TOOLGATE_BIN=target/debug/toolgate node --test e2e/
// This file starts its own toolgate (TOOLGATE_BIN) that takes the user
// from an `X-User` header, as a proxy in front of it would set it, and
// whose payments need a finance approver (four eyes). Each browser
// profile sends its own user's header with every request. A page error or
// a console.error fails the flow at once, with the message.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import { chromium } from 'playwright-core';

const BIN = process.env.TOOLGATE_BIN;
assert.ok(BIN, 'set TOOLGATE_BIN to the toolgate binary');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
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
let toolgate;
let state;
let server;

before(async () => {
  state = mkdtempSync(join(tmpdir(), 'toolgate-inbox-'));
  const config = join(state, 'toolgate.yaml');
  writeFileSync(config, CONFIG);
  toolgate = spawn(BIN, ['serve', '--bind', '127.0.0.1:0', '--config', config], {
    env: { ...process.env, RUST_LOG: 'toolgate=warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: toolgate.stdout });
  const [first] = await Promise.race([
    new Promise((resolve) => lines.once('line', (line) => resolve([line]))),
    new Promise((_, reject) => toolgate.once('exit', (code) => reject(new Error(`toolgate exited: ${code}`)))),
  ]);
  server = first.replace(/^listening on /, '');
  assert.match(server, /^http:\/\/127\.0\.0\.1:\d+$/, first);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
});
after(async () => {
  await browser?.close();
  toolgate?.kill();
  if (state) rmSync(state, { recursive: true, force: true });
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

/** A flow whose page errors fail it at once rather than leave it waiting. */
function flow(name, body) {
  test(name, async (t) => {
    let fail;
    const failed = new Promise((_, reject) => {
      fail = reject;
    });
    const problem = (context, what) => {
      const error = new Error(what);
      error.stack = what;
      fail(error);
      void context.close({ reason: what });
    };
    await Promise.race([body((user, path) => open(t, problem, user, path)), failed]);
  });
}

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
  await shot(boss, 'inbox-2-approver-sees-it');

  await item.getByLabel(/Reason/).fill('checked the invoice');
  await item.getByRole('button', { name: 'Approve', exact: true }).click();
  await boss.getByText('Nothing waits for you.').waitFor();
  assert.equal(await boss.getByTestId('inbox-item').count(), 0);
  await shot(boss, 'inbox-3-approved');

  // The clerk's card learns at once that it was decided elsewhere.
  await card.getByText(/No longer open on the server/).waitFor();
  await shot(clerk, 'inbox-4-clerk-card-closed');

  // The clerk's audit log says who approved it.
  const approvals = await clerk.evaluate(async () => {
    const chat = JSON.parse(localStorage.getItem('toolgate-demo:chat'));
    const lines = await (await fetch(`/api/audit?chatId=${chat}`)).text();
    return lines
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line))
      .filter((event) => event.decision === 'approved')
      .map((event) => event.by);
  });
  assert.deepEqual(approvals, ['boss through the API']);

  // The clerk writes on; the next answer brings the outcome into the chat.
  await clerk.getByLabel('Message').fill('What is the weather in Paris?');
  await clerk.getByLabel('Message').press('Enter');
  const later = clerk.getByTestId('later-outcome');
  await later.waitFor();
  assert.match(await later.innerText(), /process_payment was approved later and ran\./);
  await shot(clerk, 'inbox-5-clerk-learns-the-outcome');
});
