// Drives a page watching two streams (`python -m app --ui --stream a=... --stream b=...`) in headless chromium.
//
//   node tests/ui_browser/streams_test.js URL OUT_DIR
//
// Checks: a panel per stream, each with a frame, its caption's stream time and a Watching status; the summary
// names both streams; a question sent to stream b only is answered once, labelled b, and no turn for a appears;
// the memory plot has a line per stream plus their total. Prints one JSON line with what it saw; exits 1 with a
// message on the first failed check. Screenshots: OUT_DIR/streams.png (failure.png on a failure).
'use strict';

const path = require('path');
const { askStream, chat, check, run } = require('./browser');

const [url, outDir] = process.argv.slice(2);
if (!url || !outDir) {
  console.error('usage: node streams_test.js URL OUT_DIR');
  process.exit(2);
}
const STREAMS = ['a', 'b'];

run('streams', outDir, { width: 1400, height: 1000 }, async (page, seen, pageErrors) => {
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 30000 });
  await page.waitForSelector('#chat', { timeout: 30000 });

  // 1. a panel per stream: its frame, its stream time, Watching with lag and KV
  for (const name of STREAMS) {
    await page.waitForSelector(`#preview-${name} img`, { timeout: 40000 });
    await page.waitForFunction((n) => /t = [0-9:.]+/.test(document.querySelector(`#caption-${n}`).innerText),
      name, { timeout: 30000 });
    await page.waitForFunction((n) => /Watching .* lag [0-9.]+ s/.test(document.querySelector(`#status-${n}`).innerText),
      name, { timeout: 30000 });
    seen[`status_${name}`] = await page.innerText(`#status-${name}`);
    check(/KV [0-9.]+ MiB/.test(seen[`status_${name}`]), `stream ${name} status lacks its KV: ${seen[`status_${name}`]}`);
  }
  check(seen.status_a.includes('a.mp4') && seen.status_b.includes('b.mp4'),
    `each panel should name its own source: ${seen.status_a} / ${seen.status_b}`);
  check(!(await page.isVisible('#preview')), 'the one-stream preview is shown on a two-stream page');
  seen.summary = await page.innerText('#status');
  check(/a: watching/.test(seen.summary) && /b: watching/.test(seen.summary), `summary: ${seen.summary}`);

  // 2. a question to stream b only: one answer, labelled b; none for a
  const question = 'Which stream is this?';
  await askStream(page, 'b', question, 40000);
  const messages = await chat(page);
  const asked = messages.map((m, i) => [m, i]).filter(([m]) => m.role === 'user' && m.text.includes(question));
  seen.askedTurns = asked.map(([m]) => m.text);
  seen.answer = messages[asked[0][1] + 1].text;
  check(asked.length === 1, `expected one turn for the question, got ${JSON.stringify(seen.askedTurns)}`);
  check(/\[b\]/.test(asked[0][0].text) && !/\[a\]/.test(asked[0][0].text), `question label: ${asked[0][0].text}`);
  check(/stream b · round \d+/.test(seen.answer) && !/stream a/.test(seen.answer), `answer label: ${seen.answer}`);

  // 3. the memory plot: the total and one KV line per stream (and the host store: 4 lines)
  await page.waitForFunction(() => document.querySelectorAll('#memory-plot g.mark-line path').length >= 3,
    null, { timeout: 20000, polling: 250 });
  seen.memoryPlot = await page.innerText('#memory-plot');
  for (const series of ['KV cache a', 'KV cache b', 'KV cache, all streams']) {
    check(seen.memoryPlot.includes(series), `memory plot legend lacks ${series}: ${seen.memoryPlot}`);
  }
  seen.cachePlot = await page.innerText('#cache-plot');
  check(seen.cachePlot.includes('a: cache tokens') && seen.cachePlot.includes('b: cache tokens'),
    `cache plot legend: ${seen.cachePlot}`);

  check(pageErrors.length === 0, `errors in the page: ${pageErrors.join('; ')}`);
  await page.screenshot({ path: path.join(outDir, 'streams.png'), fullPage: true });
});
