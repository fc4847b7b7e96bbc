// Drives the page on the head of a fleet (`python -m app --ray ADDRESS --ui --stream a=... --stream b=...`) in
// headless chromium.
//
//   node tests/ui_browser/fleet_test.js URL OUT_DIR
//
// Checks: a panel per stream, each with a frame from its host (the shrunk preview), Watching, and the host it
// runs on; the summary names both; a question sent to stream b only is answered once, labelled b; the controls the
// fleet cannot do (Start, Stop, Reset memory, the standing question's editor, file and camera sources) are not on
// the page, those it can (ask, add by URL, remove) are; Remove stream on b marks its panel removed. Prints one JSON line with what it saw (each
// stream's host among it); exits 1 with a message on the first failed check.
// Screenshots: OUT_DIR/fleet.png (failure.png on a failure).
'use strict';

const path = require('path');
const { askStream, chat, check, run } = require('./browser');

const [url, outDir] = process.argv.slice(2);
if (!url || !outDir) {
  console.error('usage: node fleet_test.js URL OUT_DIR');
  process.exit(2);
}
const STREAMS = ['a', 'b'];

run('fleet', outDir, { width: 1400, height: 1000 }, async (page, seen, pageErrors) => {
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 30000 });
  await page.waitForSelector('#chat', { timeout: 30000 });

  // 1. a panel per stream: a frame that came from its host, Watching, and the host it runs on
  for (const name of STREAMS) {
    await page.waitForSelector(`#preview-${name} img`, { timeout: 120000 });
    await page.waitForFunction((n) => {
      const text = document.querySelector(`#status-${n}`).innerText;
      return /on host \S+/.test(text) && /Watching .* lag [0-9.]+ s/.test(text);
    }, name, { timeout: 60000 });
    seen[`status_${name}`] = await page.innerText(`#status-${name}`);
    seen[`host_${name}`] = /on host (\S+)/.exec(seen[`status_${name}`])[1];
  }
  seen.summary = await page.innerText('#status');
  check(/a: watching on \S+/.test(seen.summary) && /b: watching on \S+/.test(seen.summary), `summary: ${seen.summary}`);

  // 2. a question to stream b only, routed to b's host: one answer, labelled b
  const question = 'Which stream is this?';
  seen.answer = await askStream(page, 'b', question, 120000);
  const messages = await chat(page);
  const asked = messages.filter((m) => m.role === 'user' && m.text.includes(question));
  seen.askedTurns = asked.map((m) => m.text);
  check(asked.length === 1 && /\[b\]/.test(asked[0].text), `question turns: ${JSON.stringify(seen.askedTurns)}`);
  check(/stream b · round \d+/.test(seen.answer) && !/stream a/.test(seen.answer), `answer label: ${seen.answer}`);

  // 3. what the fleet cannot do yet is not on the page; what it can do is
  const visible = async (ids) => {
    const shown = [];
    for (const id of ids) if (await page.isVisible(`#${id}`)) shown.push(id);
    return shown;
  };
  seen.inPlaceShown = await visible(['start', 'stop', 'reset', 'standing', 'every', 'apply', 'upload', 'camera']);
  seen.fleetShown = await visible(['ask-box', 'ask', 'ask-stream', 'add-stream', 'remove-stream', 'source-stream',
    'location']);
  check(seen.inPlaceShown.length === 0, `controls the fleet cannot do are shown: ${seen.inPlaceShown}`);
  check(seen.fleetShown.length === 7, `controls the fleet can do: only ${seen.fleetShown} shown`);
  // adding takes its source from the URL box (the hidden source choice says so): an empty one is asked for
  await page.fill('#new-stream-name textarea, #new-stream-name input', 'c');
  await page.click('#add-stream');
  await page.waitForFunction(() => /cannot add stream 'c'/.test(document.querySelector('#add-stream-msg').innerText),
    null, { timeout: 30000, polling: 100 });
  seen.addWithoutUrl = await page.innerText('#add-stream-msg');
  check(/type a video path or a stream URL first/.test(seen.addWithoutUrl), `add without a URL: ${seen.addWithoutUrl}`);
  await page.screenshot({ path: path.join(outDir, 'fleet.png'), fullPage: true });

  // 4. Remove stream b: the coordinator takes it off its host, and its panel says so once the host has
  await page.click('#source-stream input');
  await page.click('[role="option"]:text-is("b")');
  await page.click('#remove-stream');
  await page.waitForFunction(() => /stream b removed/.test(document.querySelector('#source-msg').innerText),
    null, { timeout: 30000, polling: 100 });
  await page.waitForFunction(() => /^removed$/.test(document.querySelector('#status-b').innerText.trim()),
    null, { timeout: 30000, polling: 200 });
  seen.summaryAfterRemoval = await page.innerText('#status');
  check(!/b: /.test(seen.summaryAfterRemoval), `b is still in the summary: ${seen.summaryAfterRemoval}`);

  check(pageErrors.length === 0, `errors in the page: ${pageErrors.join('; ')}`);
});
