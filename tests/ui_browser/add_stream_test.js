// Adds a stream from the page of a one-stream run (`python -m app --ui --stream a=...`) in headless chromium.
//
//   node tests/ui_browser/add_stream_test.js URL OUT_DIR NEW_VIDEO
//
// Checks: a typed path, a writing gst: pipeline, a listening tcp:// and a taken name are refused with their message
// and no panel appears; "Add stream"
// with name b and NEW_VIDEO shows the admission arithmetic, then b's panel appears (labelled, a frame, Watching
// with lag and KV) next to a's preview, which goes on; the summary names both with the KV of all streams; b is
// in the question selector and a question to b is answered by b; the memory plot gets a KV line for each stream
// and their total; the History tab's stream selector lists b; Remove stream on b hides its panel and, one stream
// left, the stream selectors. Prints one JSON line with what it saw; exits 1 on the first failed check.
// Screenshots: OUT_DIR/add_stream.png (failure.png on a failure).
'use strict';

const path = require('path');
const { askStream, check, run } = require('./browser');

const [url, outDir, newVideo] = process.argv.slice(2);
if (!url || !outDir || !newVideo) {
  console.error('usage: node add_stream_test.js URL OUT_DIR NEW_VIDEO');
  process.exit(2);
}

// Types a name and a path, presses "Add stream" and returns the message once it matches `expected` (the one
// for this name: the previous message stays on screen under a progress timer meanwhile).
async function add(page, seen, name, location, expected) {
  await page.fill('#location textarea, #location input', location);
  await page.fill('#new-stream-name textarea, #new-stream-name input', name);
  await page.click('#add-stream');
  try {
    await page.waitForFunction((re) => new RegExp(re).test(document.querySelector('#add-stream-msg').innerText),
      expected.source, { timeout: 30000, polling: 100 });
  } finally {
    seen.lastMessage = await page.innerText('#add-stream-msg');
  }
  return seen.lastMessage;
}

run('add_stream', outDir, { width: 1400, height: 1200 }, async (page, seen, pageErrors) => {
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 30000 });
  await page.waitForSelector('#chat', { timeout: 30000 });
  await page.waitForSelector('#preview img', { timeout: 40000 });
  check(!(await page.isVisible('#ask-stream')), 'the stream selector is shown with one stream');

  // 1. refusals: hostile sources (a typed path, a writing gst: pipeline, a listening tcp://), a taken name;
  // nothing appears
  seen.missing = await add(page, seen, 'b', '/nonexistent/missing.mp4', /stream 'b'/);
  check(/cannot add stream 'b': local paths cannot be chosen/.test(seen.missing), `typed path: ${seen.missing}`);
  seen.gst = await add(page, seen, 'g', 'gst:v4l2src ! tee name=t ! appsink t. ! queue ! filesink location=/tmp/x',
    /stream 'g'/);
  check(/cannot add stream 'g': gst: pipelines cannot be chosen/.test(seen.gst), `gst: ${seen.gst}`);
  seen.listen = await add(page, seen, 't', 'tcp://0.0.0.0:9000?listen=1', /stream 't'/);
  check(/cannot add stream 't': 'tcp:' sources cannot be chosen/.test(seen.listen), `tcp listen: ${seen.listen}`);
  seen.taken = await add(page, seen, 'a', newVideo, /stream 'a'/);
  check(/cannot add stream 'a'.*exists already/.test(seen.taken), `taken name: ${seen.taken}`);
  check(!(await page.isVisible('#stream-slot-0')), 'a panel appeared for a refused stream');

  // 2. add b: the admission line, then its panel with a frame, Watching with lag and KV
  seen.added = await add(page, seen, 'b', newVideo, /stream b added/);
  check(/stream b added; memory: 2 stream\(s\) x \(/.test(seen.added), `added: ${seen.added}`);
  await page.waitForSelector('#stream-slot-0 #preview-slot-0 img', { timeout: 40000 });
  seen.panelLabel = await page.innerText('#stream-slot-0');
  check(seen.panelLabel.includes('stream b'), `the new panel is not labelled b: ${seen.panelLabel}`);
  await page.waitForFunction(() => /Watching .* lag [0-9.]+ s/.test(document.querySelector('#status-slot-0').innerText),
    null, { timeout: 30000 });
  seen.statusB = await page.innerText('#status-slot-0');
  check(seen.statusB.includes(path.basename(newVideo)) && /KV [0-9.]+ MiB/.test(seen.statusB),
    `b's status: ${seen.statusB}`);
  check(!(await page.isVisible('#stream-slot-1')), 'more than one spare panel is shown');
  check(await page.isVisible('#preview img'), "a's preview is gone");
  await page.waitForFunction(() => /b: watching/.test(document.querySelector('#status').innerText),
    null, { timeout: 30000 });
  seen.summary = await page.innerText('#status');
  check(/Watching .*a\.mp4/.test(seen.summary) && /a: watching/.test(seen.summary), `summary: ${seen.summary}`);
  check(/KV cache, all streams: [0-9.]+ MiB/.test(seen.summary), `summary lacks the total KV: ${seen.summary}`);

  // 3. a question to b, through the selector that now lists it: answered by b
  await page.waitForSelector('#ask-stream', { state: 'visible', timeout: 10000 });
  seen.answer = await askStream(page, 'b', 'What does stream b show?', 60000);
  check(/stream b · round \d+/.test(seen.answer), `answer label: ${seen.answer}`);

  // 4. the memory plot: a KV line per stream and their total
  await page.waitForFunction(() => {
    const text = document.querySelector('#memory-plot').innerText;
    return text.includes('KV cache b') && text.includes('KV cache, all streams');
  }, null, { timeout: 20000, polling: 250 });
  seen.memoryPlot = await page.innerText('#memory-plot');
  check(seen.memoryPlot.includes('KV cache a'), `memory plot legend: ${seen.memoryPlot}`);

  // 5. the History tab can search the new stream's moments
  await page.screenshot({ path: path.join(outDir, 'add_stream.png'), fullPage: true });
  await page.getByRole('tab', { name: 'History' }).click();
  await page.click('#history-stream input');
  seen.historyStreams = await page.$$eval('[role="option"]', (els) => els.map((el) => el.innerText.trim()));
  check(seen.historyStreams.includes('b'), `History's stream choices: ${seen.historyStreams}`);
  await page.keyboard.press('Escape');

  // 6. Remove stream: b's panel goes, the selectors forget it, a goes on
  await page.getByRole('tab', { name: 'Live' }).click();
  await page.click('#source-stream input');
  await page.click('[role="option"]:text-is("b")');
  await page.click('#remove-stream');
  await page.waitForFunction(() => /stream b removed/.test(document.querySelector('#source-msg').innerText),
    null, { timeout: 30000, polling: 100 });
  seen.removed = await page.innerText('#source-msg');
  await page.waitForSelector('#stream-slot-0', { state: 'hidden', timeout: 20000 });
  await page.waitForSelector('#ask-stream', { state: 'hidden', timeout: 20000 });  // one stream again: no selector
  check(await page.isVisible('#preview img'), "a's preview is gone after removing b");

  check(pageErrors.length === 0, `errors in the page: ${pageErrors.join('; ')}`);
});
