// Drives a page whose stream STREAM has a watch that always fires (`python -m app --ui --config ALERTS.toml ...`) in
// headless chromium; the page may watch other streams too.
//
//   node tests/ui_browser/alerts_test.js URL OUT_DIR ALERT STREAM
//
// Checks: the banner at the top names the alert and its stream; the Alerts list has a row for it with a
// snapshot thumbnail that loaded (an <img> with a non-zero natural width), its question and p_yes; the stream's
// status (its panel's, with several streams) shows the watch's latest p_yes. Prints one JSON line with what it
// saw; exits 1 with a message on the first failed check. Screenshots: OUT_DIR/alerts.png, failure.png on a failure.
'use strict';

const path = require('path');
const { check, run } = require('./browser');

const [url, outDir, alert, stream] = process.argv.slice(2);
if (!url || !outDir || !alert || !stream) {
  console.error('usage: node alerts_test.js URL OUT_DIR ALERT STREAM');
  process.exit(2);
}

run('alerts', outDir, { width: 1280, height: 900 }, async (page, seen, pageErrors) => {
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 30000 });
  await page.waitForSelector('#chat', { timeout: 30000 });

  // 1. the banner: the alert, its stream, since when, p_yes
  await page.waitForSelector('#alert-banner .alert-line', { timeout: 40000 });
  seen.banner = await page.innerText('#alert-banner');
  check(seen.banner.includes(alert), `the banner does not name the alert ${alert}: ${seen.banner}`);
  check(seen.banner.includes(`on stream ${stream}`), `the banner does not name the stream: ${seen.banner}`);
  check(/since t = [0-9:.]+ s? ?\(\d\d:\d\d:\d\d\)/.test(seen.banner), `the banner lacks when: ${seen.banner}`);
  check(/p_yes [01]\.\d\d/.test(seen.banner), `the banner lacks p_yes: ${seen.banner}`);
  const bannerBox = await page.locator('#alert-banner').boundingBox();
  const chatBox = await page.locator('#chat').boundingBox();
  check(bannerBox.y < chatBox.y, 'the banner is not above the chat');

  // 2. the list: a row for the alert with a loaded thumbnail
  await page.waitForSelector('#alerts-list tr.alert-row img', { timeout: 20000 });
  await page.waitForFunction(() => {
    const img = document.querySelector('#alerts-list tr.alert-row img');
    return img && img.complete && img.naturalWidth > 0;
  }, null, { timeout: 10000, polling: 100 });
  seen.thumbnail = await page.$eval('#alerts-list tr.alert-row img',
    (img) => ({ naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight, src: img.src.slice(0, 23) }));
  seen.row = await page.innerText('#alerts-list tr.alert-row');
  check(seen.row.includes(alert) && seen.row.includes(stream), `the row lacks the alert or stream: ${seen.row}`);
  check(/ongoing/.test(seen.row), `an alert that never ends is not ongoing: ${seen.row}`);

  // 3. the stream's status (its panel's on a page of several streams): the watch's latest p_yes
  const status = (await page.$(`#status-${stream}`)) ? `#status-${stream}` : '#status';
  await page.waitForFunction(([a, sel]) => new RegExp(`watches: ${a} [01]\\.\\d\\d`).test(
    document.querySelector(sel).innerText), [alert, status], { timeout: 20000 });
  seen.status = await page.innerText(status);

  check(pageErrors.length === 0, `errors in the page: ${pageErrors.join('; ')}`);
  await page.screenshot({ path: path.join(outDir, 'alerts.png'), fullPage: true });
});
