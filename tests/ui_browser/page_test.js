// Drives the running web demo in Debian's headless chromium (playwright-core, no bundled browser).
//
//   node tests/ui_browser/page_test.js URL OUT_DIR BAD_URL VIDEO_PATH
//
// Checks, in two tabs of one browser: the page loads; the stream starts (preview frame, stream time);
// an automatic question and typed questions (one from each tab, sent at the same moment) get answers;
// the memory and cache plots have points; a bad URL shows an error message while the stream keeps running;
// an upload that is not a video is refused, an uploaded video becomes the stream.
// Prints one JSON line with what it saw; exits 1 with a message on the first failed check. Screenshots
// go to OUT_DIR (page.png: the second tab at the end; failure.png: the first tab on a failure).
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');
const { FLAGS, answerTo, chat, check } = require('./browser');

const [url, outDir, badUrl, videoPath] = process.argv.slice(2);
if (!url || !outDir || !badUrl || !videoPath) {
  console.error('usage: node page_test.js URL OUT_DIR BAD_URL VIDEO_PATH');
  process.exit(2);
}
const executablePath = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

async function streamTime(page) {
  const text = await page.innerText('#preview-caption');
  const match = text.match(/t = ([0-9.]+) s/);
  return match ? parseFloat(match[1]) : null;
}

// Points drawn per line of a plot (vega renders SVG paths: one "M" then one "L" per further point).
async function linePoints(page, id) {
  return page.$$eval(`#${id} g.mark-line path`, (paths) =>
    paths.map((p) => (p.getAttribute('d') || '').split(/[ML]/).filter((s) => s.trim()).length));
}

async function main() {
  fs.mkdirSync(outDir, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'ui-test-profile-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath, headless: true, args: FLAGS, viewport: { width: 1400, height: 1100 },
  });
  const seen = {};
  const [tabA, tabB] = [await context.newPage(), await context.newPage()];
  const pageErrors = [];
  for (const tab of [tabA, tabB]) tab.on('pageerror', (err) => pageErrors.push(String(err)));
  try {
    // 1. the page loads, in two tabs
    for (const tab of [tabA, tabB]) {
      await tab.goto(url, { waitUntil: 'domcontentloaded', timeout: 30000 });
      await tab.waitForSelector('#chat', { timeout: 30000 });
    }
    seen.settings = await tabA.innerText('#settings');
    check(/policy\s+inf-mllm/.test(seen.settings), `settings line lacks the policy: ${seen.settings}`);

    // 2. the stream started: a preview frame with its stream time
    await tabA.waitForSelector('#preview img', { timeout: 30000 });
    await tabA.waitForFunction(() => /t = [0-9.]+ s/.test(document.querySelector('#preview-caption').innerText),
      null, { timeout: 30000 });
    seen.firstStreamTime = await streamTime(tabA);
    seen.status = await tabA.innerText('#status');
    check(seen.status.includes('Watching'), `status does not say Watching: ${seen.status}`);

    // 3. the standing question is asked by itself, marked [auto], and answered with its metrics
    seen.autoAnswer = await answerTo(tabA, '[auto]', 40000);
    check(/round \d+/.test(seen.autoAnswer) && /tokens\/s/.test(seen.autoAnswer),
      `automatic answer without its metrics: ${seen.autoAnswer}`);

    // 4. a typed question from each tab, sent at the same moment; both answered, in both tabs
    const questions = ['What colour is the square?', 'Is there any text on screen?'];
    await tabA.fill('#ask-box textarea', questions[0]);
    await tabB.fill('#ask-box textarea', questions[1]);
    await Promise.all([tabA.press('#ask-box textarea', 'Enter'), tabB.press('#ask-box textarea', 'Enter')]);
    seen.typedAnswers = [];
    for (const tab of [tabA, tabB]) {
      for (const q of questions) seen.typedAnswers.push(await answerTo(tab, q, 30000));
    }
    const typedUser = (await chat(tabA)).filter((m) => m.role === 'user' && questions.some((q) => m.text.includes(q)));
    check(typedUser.every((m) => !m.text.includes('[auto]')), 'a typed question is marked [auto]');
    check((await tabA.inputValue('#ask-box textarea')) === '', 'the question box was not cleared');

    // 5. the plots have points: memory (process memory on CPU), KV-cache tokens with the budget line
    await tabA.waitForFunction(() => {
      const d = document.querySelector('#memory-plot g.mark-line path')?.getAttribute('d') || '';
      return d.split('L').length >= 3;
    }, null, { timeout: 20000, polling: 250 });
    seen.memoryLinePoints = await linePoints(tabA, 'memory-plot');
    seen.cacheLinePoints = await linePoints(tabA, 'cache-plot');
    check(seen.memoryLinePoints.length >= 3 && Math.min(...seen.memoryLinePoints) >= 3,
      `memory plot lines: ${JSON.stringify(seen.memoryLinePoints)}`);
    check(seen.cacheLinePoints.length >= 3, `cache plot lines: ${JSON.stringify(seen.cacheLinePoints)}`);
    seen.memoryLegend = await tabA.innerText('#memory-plot');
    check(seen.memoryLegend.includes('process memory (CPU)') || seen.memoryLegend.includes('memory'),
      `memory plot without its label: ${seen.memoryLegend}`);

    // 6. a bad URL: a message in the page, and the stream goes on
    const before = await streamTime(tabA);
    await tabA.click('#source-kind label:has-text("path or URL")');
    await tabA.fill('#location textarea', badUrl);
    await tabA.click('#start');
    await tabA.waitForFunction(() => document.querySelector('#source-msg').innerText.includes('cannot watch it'),
      null, { timeout: 20000 });
    seen.badUrlMessage = await tabA.innerText('#source-msg');
    check(!/Traceback/.test(seen.badUrlMessage), 'the page shows a traceback');
    await tabA.waitForFunction((t) => {
      const m = document.querySelector('#preview-caption').innerText.match(/t = ([0-9.]+) s/);
      return m && parseFloat(m[1]) > t;
    }, before, { timeout: 15000, polling: 250 });
    seen.streamTimeAfterError = await streamTime(tabA);
    seen.statusAfterError = await tabA.innerText('#status');
    check(seen.statusAfterError.includes('Watching'), `the stream stopped: ${seen.statusAfterError}`);
    // the other tab (in the background: its timers run less often) shows it in its activity log
    await tabB.waitForFunction(() => document.querySelector('#log').innerText.includes('cannot watch it'),
      null, { timeout: 20000, polling: 250 }).catch(() => {});
    seen.activity = await tabB.innerText('#log');
    check(seen.activity.includes('cannot watch it'), 'the other tab does not see the error in the activity log');

    // 7. uploads: Start without one, or a file that is not a video, gives a message; a video becomes the stream
    await tabA.click('#source-kind label:has-text("file upload")');
    await tabA.click('#start');
    await tabA.waitForFunction(() => document.querySelector('#source-msg').innerText.includes('no file uploaded'),
      null, { timeout: 20000 });
    const notVideo = path.join(outDir, 'notes.txt');
    fs.writeFileSync(notVideo, 'not a video');
    await tabA.setInputFiles('#upload input[type="file"]', notVideo);
    await tabA.waitForFunction(() => /Invalid file type/.test(document.body.innerText), null, { timeout: 20000 });
    seen.badUploadMessage = (await tabA.innerText('body')).match(/.*Invalid file type.*/)[0];
    check((await tabA.innerText('#status')).includes('Watching'), 'a refused upload stopped the stream');
    await tabA.setInputFiles('#upload input[type="file"]', videoPath);
    const stem = path.basename(videoPath, path.extname(videoPath));
    await tabA.waitForFunction((name) => document.querySelector('#upload').innerText.includes(name),
      stem, { timeout: 20000 });
    await tabA.click('#start');
    // an upload is shown by its name, not by the server's folder (ui/upload_names.py)
    await tabA.waitForFunction(
      () => /Watching file 'upload:/.test(document.querySelector('#status').innerText),
      null, { timeout: 20000, polling: 250 });
    seen.statusAfterUpload = await tabA.innerText('#status');
    // the other tab (no pop-up messages over it) shows the uploaded stream's first frame
    await tabB.waitForFunction(() => /Watching file 'upload:.*' · t = [1-9]/.test(
      document.querySelector('#status').innerText), null, { timeout: 20000, polling: 250 });

    check(pageErrors.length === 0, `errors in the page: ${pageErrors.join('; ')}`);
    await tabB.screenshot({ path: path.join(outDir, 'page.png'), fullPage: true });
    console.log(JSON.stringify(seen));
  } catch (err) {
    await tabA.screenshot({ path: path.join(outDir, 'failure.png'), fullPage: true }).catch(() => {});
    console.log(JSON.stringify(seen));
    throw err;
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(`UI TEST FAILED: ${err.message}`);
  process.exit(1);
});
