// What the browser flows share: Debian's Chromium launched headless with
// nothing that reaches the network by itself, and a toolgate of a flow's
// own, started from TOOLGATE_BIN with a config, on a free loopback port.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

/** Headless Chromium; no downloads, sync or update checks (the test machine's network is closed). */
export function launchChromium() {
  return chromium.launch({
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
}

/**
 * Starts TOOLGATE_BIN on `config` (YAML text) with `args` and `env` added;
 * resolves to `{ url, stop }` once it says where it listens.
 */
export async function serveToolgate(config, { args = [], env = {} } = {}) {
  const bin = process.env.TOOLGATE_BIN;
  assert.ok(bin, 'set TOOLGATE_BIN to the toolgate binary');
  const state = mkdtempSync(join(tmpdir(), 'toolgate-e2e-'));
  const file = join(state, 'toolgate.yaml');
  writeFileSync(file, config);
  const toolgate = spawn(bin, ['serve', '--bind', '127.0.0.1:0', '--config', file, ...args], {
    env: { ...process.env, RUST_LOG: 'toolgate=warn', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const stop = () => {
    toolgate.kill();
    rmSync(state, { recursive: true, force: true });
  };
  const lines = createInterface({ input: toolgate.stdout });
  try {
    const [first] = await Promise.race([
      new Promise((resolve) => lines.once('line', (line) => resolve([line]))),
      new Promise((_, reject) => toolgate.once('exit', (code) => reject(new Error(`toolgate exited: ${code}`)))),
    ]);
    const url = first.replace(/^listening on /, '');
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/, first);
    return { url, stop };
  } catch (error) {
    stop();
    throw error;
  }
}

/**
 * A browser flow: `body` gets `open` for its pages, `opener` with the
 * test and the flow's `problem` first. An uncaught exception in a page or
 * a console.error (reported through `problem`) fails the flow at once with
 * its message, rather than leaving it to wait for something that will
 * never show.
 */
export function watchedFlow(name, opener, body) {
  test(name, async (t) => {
    let fail;
    const failed = new Promise((_, reject) => {
      fail = reject;
    });
    const problem = (context, what) => {
      const error = new Error(what);
      error.stack = what; // where the flow noticed says nothing; `what` has the page's own
      fail(error);
      // Ends what the flow still waits for (the reason in each error).
      void context.close({ reason: what });
    };
    await Promise.race([body((...args) => opener(t, problem, ...args)), failed]);
  });
}

/** The audit log's events of the chat open in `page` (`GET /api/audit?chatId=`), oldest first. */
export function chatAudit(page) {
  return page.evaluate(async () => {
    const chat = JSON.parse(localStorage.getItem('toolgate-demo:chat'));
    const lines = await (await fetch(`/api/audit?chatId=${chat}`)).text();
    return lines
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
  });
}
