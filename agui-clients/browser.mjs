// assistant-ui's AG-UI runtime (`@assistant-ui/react-ag-ui`, unmodified)
// in headless Chromium against toolgate's POST /ag-ui, through a
// confirmation. Run by tests/it/agui_browser.rs:
//
//   CHROMIUM=/usr/bin/chromium node agui-clients/browser.mjs <toolgate url> <user>
//
// Builds the page of web/ with Vite, serves it on a loopback port of its
// own and passes `/ag-ui` on to toolgate as a trusted proxy does (setting
// the principal header to <user>, streaming the answer through), then
// drives two threads as a user would: a payment approved in the page's
// confirmation, and one denied with a reason. Waits on what the page
// shows, never on time. Prints one JSON line: what the page showed.
import { createReadStream, mkdtempSync, rmSync } from "node:fs";
import { request as httpRequest, createServer } from "node:http";
import { tmpdir } from "node:os";
import { extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "vite";
import { chromium } from "playwright-core";

const [toolgate, user] = process.argv.slice(2);
if (!toolgate || !user) {
  console.error("usage: node browser.mjs <toolgate url> <user>");
  process.exit(2);
}
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
/// How long one thing the page should show may take to show.
const TIMEOUT = 30_000;

const web = fileURLToPath(new URL("web/", import.meta.url));
const dist = mkdtempSync(join(tmpdir(), "agui-browser-"));
await build({
  root: web,
  logLevel: "error",
  build: { outDir: dist, emptyOutDir: true },
});

const TYPES = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css" };

/// `/ag-ui` to toolgate with the principal set (whatever the page sent),
/// its answer streamed back as it comes; anything else from the build.
function serve(req, res) {
  const path = new URL(req.url, "http://page").pathname;
  if (path === "/ag-ui") {
    const upstream = httpRequest(
      new URL("/ag-ui", toolgate),
      // The page's own Host and Origin go on, as a reverse proxy keeps them.
      { method: req.method, headers: { ...req.headers, "x-user": user } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
    return;
  }
  if (path === "/favicon.ico") {
    res.writeHead(204).end();
    return;
  }
  const file = normalize(join(dist, path === "/" ? "index.html" : path));
  if (!file.startsWith(dist)) {
    res.writeHead(404).end();
    return;
  }
  const stream = createReadStream(file);
  stream.on("error", () => res.writeHead(404).end());
  stream.on("open", () => {
    res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" });
    stream.pipe(res);
  });
}

const server = createServer(serve);
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const page_url = `http://127.0.0.1:${server.address().port}`;

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});

/// One thread in a fresh page: the user sends `text`, the confirmation
/// shows, the user answers it (`approve`, or deny with `reason`); what
/// the page showed then.
async function thread(name, text, { approve, reason }) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(e.message));
  page.on("console", (m) => m.type() === "error" && problems.push(m.text()));
  const requests = [];
  page.on("request", (r) => r.url().endsWith("/ag-ui") && requests.push(JSON.parse(r.postData() ?? "{}")));
  try {
    await page.goto(`${page_url}/?thread=${name}`);
    await page.getByLabel("Message").fill(text);
    await page.getByRole("button", { name: "Send" }).click();
    const dialog = page.getByRole("dialog", { name: "Confirmation" });
    await dialog.waitFor({ timeout: TIMEOUT });
    const asked = await dialog.locator(".interrupt").innerText();
    const toolBefore = await page.locator(".tool-call").first().innerText();
    const statusAsked = await page.locator(".message.assistant").last().getAttribute("data-status");
    if (reason) await dialog.getByLabel("Reason").fill(reason);
    await dialog.getByRole("button", { name: approve ? "Approve" : "Deny" }).click();
    await page.locator(".tool-call output").first().waitFor({ timeout: TIMEOUT });
    await dialog.waitFor({ state: "detached", timeout: TIMEOUT });
    // The resumed run is over: its message is complete, its text whole.
    await page.locator('.message.assistant[data-status="complete"]').last().waitFor({ timeout: TIMEOUT });
    return {
      asked,
      toolBefore,
      statusAsked,
      // Each call once: the events and the run's messages snapshot agree
      // on the message that carries it.
      toolCalls: await page.locator(".tool-call").count(),
      result: await page.locator(".tool-call output").first().innerText(),
      texts: await page.locator(".message.assistant p").allInnerTexts(),
      requests: requests.map((r) => ({ threadId: r.threadId, runId: r.runId, resume: r.resume ?? null })),
      problems,
    };
  } catch (error) {
    throw new Error(`${name}: ${error.message}\nproblems: ${problems.join("\n")}\npage: ${await page.content()}`);
  } finally {
    await context.close();
  }
}

try {
  const approved = await thread("b-approved", "Send 50 USD to Hanako", { approve: true });
  const denied = await thread("b-denied", "Send 50 USD to Hanako", { approve: false, reason: "not today" });
  console.log(JSON.stringify({ browser: `Chromium ${browser.version()}`, approved, denied }));
} finally {
  await browser.close();
  server.close();
  rmSync(dist, { recursive: true, force: true });
}
