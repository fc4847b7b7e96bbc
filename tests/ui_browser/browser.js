// What the page tests share: Debian's chromium driven headless by playwright-core (no browser download), a
// fresh profile, one page that records its uncaught errors, and how a test ends: one JSON line of what it saw
// on stdout, exit code 1 and OUT_DIR/failure.png on the first failed check.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

function check(condition, message) {
  if (!condition) throw new Error(message);
}

// The chat as [{role, text}] in page order.
async function chat(page) {
  return page.$$eval('#chat [data-testid="user"], #chat [data-testid="bot"]', (els) =>
    els.map((el) => ({ role: el.getAttribute('data-testid'), text: el.innerText })));
}

// The answer shown right after `question` (a user message containing it), once it has its metrics line.
async function answerTo(page, question, timeoutMs) {
  await page.waitForFunction((q) => {
    const els = [...document.querySelectorAll('#chat [data-testid="user"], #chat [data-testid="bot"]')];
    const i = els.findIndex((el) => el.getAttribute('data-testid') === 'user' && el.innerText.includes(q));
    return i >= 0 && i + 1 < els.length && /ttft [0-9.]+ s/.test(els[i + 1].innerText);
  }, question, { timeout: timeoutMs, polling: 200 });
  const messages = await chat(page);
  const i = messages.findIndex((m) => m.role === 'user' && m.text.includes(question));
  return messages[i + 1].text;
}

// Picks `stream` in the question's stream selector, sends `question`; its answer (`answerTo`).
async function askStream(page, stream, question, timeoutMs) {
  await page.click('#ask-stream input');
  await page.click(`[role="option"]:text-is("${stream}")`);
  await page.fill('#ask-box textarea', question);
  await page.press('#ask-box textarea', 'Enter');
  return answerTo(page, question, timeoutMs);
}

// Runs `body(page, seen, pageErrors)` on a page of `viewport` size; `seen` is what gets printed.
function run(name, outDir, viewport, body) {
  (async () => {
    fs.mkdirSync(outDir, { recursive: true });
    const profile = fs.mkdtempSync(path.join(os.tmpdir(), `ui-${name}-profile-`));
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium', headless: true, args: FLAGS, viewport,
    });
    const page = await context.newPage();
    const pageErrors = [];
    page.on('pageerror', (err) => pageErrors.push(String(err)));
    const seen = {};
    try {
      await body(page, seen, pageErrors);
      console.log(JSON.stringify(seen));
    } catch (err) {
      await page.screenshot({ path: path.join(outDir, 'failure.png'), fullPage: true }).catch(() => {});
      console.log(JSON.stringify(seen));
      throw err;
    } finally {
      await context.close();
      fs.rmSync(profile, { recursive: true, force: true });
    }
  })().catch((err) => {
    console.error(`UI TEST FAILED: ${err.message}`);
    process.exit(1);
  });
}

module.exports = { FLAGS, answerTo, askStream, chat, check, run };
