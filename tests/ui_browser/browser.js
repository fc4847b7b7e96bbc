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

module.exports = { FLAGS, check, run };
