// End-to-end test of `holdcall console` in headless Debian Chromium, driven by playwright-core.
// A real home with the real binary: a denied, an allowed and a held call through a relay in
// front of the demo server, then the console, then the page: the journal shows the denied call
// and its drawer, Held shows the held call and the lines to decide it, the explain form runs
// the daemon's decision, and the theme switches to dark. Screenshots go to $HOLDCALL_SCREENSHOTS.
// Usage: node console.test.mjs (HOLDCALL_BIN names the binary; tools/browser/run sets it).

import { chromium } from "playwright-core";
import { spawn, execFileSync } from "node:child_process";
import { createInterface } from "node:readline";
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../..");
const bin = process.env.HOLDCALL_BIN || join(repo, "target/debug/holdcall");
// HOLDCALL_SCREENSHOTS names where screenshots go: `tools/browser/run --update-screenshots`
// sets it to docs/images/ (the committed ones); a plain test run keeps them out of the tree.
const images = process.env.HOLDCALL_SCREENSHOTS;
const PATIENCE = 20_000;

const dir = mkdtempSync(join(tmpdir(), "hcb"));
for (const d of ["home", "run", "user", "chrome"]) mkdirSync(join(dir, d));
const env = { ...process.env, HOLDCALL_HOME: join(dir, "home"), XDG_RUNTIME_DIR: join(dir, "run"),
  HOME: join(dir, "user"), XDG_CONFIG_HOME: join(dir, "user/.config") };
delete env.HOLDCALL_LOG;

const children = [];
let context = null;
function cleanup() {
  for (const c of children) { try { c.kill("SIGKILL"); } catch { /* already gone */ } }
  try { execFileSync(bin, ["daemon", "stop"], { env, stdio: "ignore" }); } catch { /* not running */ }
  rmSync(dir, { recursive: true, force: true });
}

function hc(...args) {
  return execFileSync(bin, args, { env, encoding: "utf8" });
}

// Lines a child writes, each awaited with a time limit.
function lineReader(stream) {
  const queue = [];
  const waiting = [];
  createInterface({ input: stream }).on("line", (l) => {
    const w = waiting.shift();
    if (w) w(l); else queue.push(l);
  });
  return () => new Promise((res, rej) => {
    if (queue.length) return res(queue.shift());
    const t = setTimeout(() => rej(new Error("no line within the time limit")), PATIENCE);
    waiting.push((l) => { clearTimeout(t); res(l); });
  });
}

async function main() {
  hc("policy", "deny", "delete_file");
  hc("policy", "ask", "add");

  const relay = spawn(bin, ["serve", "--connector", "demo", "--", bin, "demo-server"], { env, stdio: ["pipe", "pipe", "ignore"] });
  children.push(relay);
  const next = lineReader(relay.stdout);
  const send = (o) => relay.stdin.write(JSON.stringify(o) + "\n");
  const answer = async (id) => {
    for (;;) { const m = JSON.parse(await next()); if (m.id === id) return m; }
  };
  send({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "browser-test", version: "1" } } });
  await answer(0);
  send({ jsonrpc: "2.0", method: "notifications/initialized" });
  send({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "echo", arguments: { text: "hello" } } });
  assert.notEqual((await answer(1)).result.isError, true);
  send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "delete_file", arguments: { path: "/home/you/notes.txt" } } });
  assert.equal((await answer(2)).result.isError, true);
  // Held for a person; the right-to-left override must show as \u{202e}, not reorder the text.
  send({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "add", arguments: { a: 1, b: 2, note: "pay\u202eevil" } } });
  send({ jsonrpc: "2.0", id: 4, method: "ping" });
  await answer(4);

  const consoleProc = spawn(bin, ["console", "--port", "0"], { env, stdio: ["ignore", "pipe", "inherit"] });
  children.push(consoleProc);
  const first = await lineReader(consoleProc.stdout)();
  const url = /^holdcall console on (http:\/\/127\.0\.0\.1:\d+\/#token=[0-9a-f]{64})$/.exec(first);
  assert.ok(url, first);

  context = await chromium.launchPersistentContext(join(dir, "chrome"), {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1280, height: 860 },
    colorScheme: "light",
  });
  context.setDefaultTimeout(PATIENCE);
  const page = context.pages()[0] || (await context.newPage());
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto(url[1]);
  const shot = (name) => page.screenshot({ path: join(images, name), fullPage: false });

  // Overview: the chain checks, and the strip counts the held call on every view.
  await page.getByRole("heading", { name: "Overview" }).waitFor();
  await page.getByText("intact").waitFor();
  await page.getByText("1 call is waiting for a person.").waitFor();
  assert.ok(!page.url().includes("token"), "the token leaves the address bar");
  await shot("console-overview.png");

  // Journal: the denied call, and its drawer with its place in the chain.
  await page.getByRole("link", { name: "Journal" }).click();
  const denied = page.locator("tbody tr", { hasText: "delete_file" }).filter({ hasText: "call.request" });
  await denied.getByText("denied").waitFor();
  await page.getByLabel("Kind").selectOption("call.request");
  await shot("console-journal.png");
  await denied.getByRole("button").click();
  const drawer = page.getByRole("dialog");
  await drawer.getByText("prev hash", { exact: true }).waitFor();
  await drawer.getByText("hash", { exact: true }).waitFor();
  await drawer.getByText(/deny tool delete_file/).first().waitFor();
  await shot("console-drawer.png");
  await page.keyboard.press("Escape");
  await drawer.waitFor({ state: "hidden" });
  // A policy change's drawer shows its text diff.
  await page.getByLabel("Kind").selectOption("policy.change");
  await page.locator("tbody tr").first().getByRole("button").click();
  await drawer.locator("pre.diff .add", { hasText: "ToolName::" }).first().waitFor();
  await page.keyboard.press("Escape");
  await drawer.waitFor({ state: "hidden" });
  await page.getByLabel("Kind").selectOption("");

  // Held: the real arguments, control characters visible, and the lines to copy.
  await page.getByRole("link", { name: "Held", exact: true }).click();
  const held = page.locator("section.held");
  await held.waitFor();
  assert.match(await held.locator("pre.args").innerText(), /pay\\u\{202e\}evil/);
  await held.getByText(/^holdcall approve [0-9a-f]{12}$/).waitFor();
  await held.getByText(/^holdcall reject [0-9a-f]{12}$/).waitFor();
  assert.equal(await page.getByRole("button", { name: /approve/i }).count(), 0, "no approve button");
  await shot("console-held.png");

  // A new entry appears without reloading: one more allowed call, seen in the journal.
  send({ jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "echo", arguments: { text: "later" } } });
  await answer(5);
  await page.getByRole("link", { name: "Journal" }).click();
  await page.locator("tbody tr", { hasText: "call.request" }).filter({ hasText: "echo" }).nth(1).waitFor();

  // Sessions: one timeline.
  await page.getByRole("link", { name: "Sessions" }).click();
  await page.locator("tbody tr a").first().click();
  await page.locator("ol.timeline").getByText("session.start").waitFor();
  await shot("console-sessions.png");

  // Policy: explain a call with the daemon's own decision function.
  await page.getByRole("link", { name: "Policy" }).click();
  await page.getByLabel("Tool (required)").fill("delete_file");
  await page.getByLabel("Connector").fill("demo");
  await page.getByRole("button", { name: "Explain" }).click();
  await page.locator(".verdict").getByText("deny", { exact: true }).waitFor();
  await page.getByText("Cedar's diagnostics").waitFor();
  await shot("console-policy.png");

  // Dark mode, remembered.
  await page.getByRole("link", { name: "Overview" }).click();
  await page.getByRole("button", { name: /light and dark/ }).click();
  assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), "dark");
  assert.equal(await page.evaluate(() => localStorage.getItem("holdcall-theme")), "dark");
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.equal(bg, "rgb(21, 24, 27)");
  await page.getByText("intact").waitFor();
  await shot("console-dark.png");

  assert.deepEqual(errors, [], "the page logged no errors (a CSP violation would be one)");
  // The call is still held: the page decided nothing.
  assert.match(hc("approve"), /add/);
  console.log(`console browser test: ok (screenshots in ${images})`);
}

try {
  await main();
} catch (e) {
  console.error("console browser test FAILED:", e);
  process.exitCode = 1;
} finally {
  if (context) await context.close().catch(() => {});
  cleanup();
}
