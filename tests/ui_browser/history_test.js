// Drives a page that keeps a timeline (`python -m app --ui --timeline FILE ...`) in headless chromium.
//
//   node tests/ui_browser/history_test.js URL OUT_DIR
//
// Checks: an answer appears in the chat; in the History tab, searching a word of that answer shows a result row
// with that word and a thumbnail that loaded (an <img> with a non-zero natural width); a word nobody said finds
// nothing. Prints one JSON line with what it saw (the answer, the word, the row, whether answers showed their
// evidence); exits 1 with a message on the first failed check. Screenshots: OUT_DIR/history.png,
// history-chat.png (the chat), failure.png.
'use strict';

const path = require('path');
const { check, run } = require('./browser');

const [url, outDir] = process.argv.slice(2);
if (!url || !outDir) {
  console.error('usage: node history_test.js URL OUT_DIR');
  process.exit(2);
}

// Searches `word` until a result row shows (the timeline is written on its own thread, a moment later).
async function search(page, word, tries) {
  await page.fill('#history-text textarea, #history-text input', word);
  for (let i = 0; i < tries; i++) {
    await page.click('#history-search');
    try {
      await page.waitForSelector('#history-results tr.history-row', { timeout: 3000 });
      return true;
    } catch (err) {
      if (!/Timeout/.test(String(err))) throw err;
    }
  }
  return false;
}

run('history', outDir, { width: 1280, height: 800 }, async (page, seen, pageErrors) => {
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 30000 });
  await page.waitForSelector('#chat', { timeout: 30000 });

  // 1. an answer with a word in it (its first line: the answer; then evidence and the metrics line)
  // (a word of the answer only: on the shared app the chat also holds questions other tests typed, and a bubble
  // may repeat one; a word of a question would find that question's row, not an answer with the word)
  const answer = await page.waitForFunction(() => {
    const asked = [...document.querySelectorAll('#chat [data-testid="user"]')].map((u) => u.innerText.toLowerCase());
    const inQuestion = (w) => asked.some((q) => q.includes(w.toLowerCase()));
    for (const bot of document.querySelectorAll('#chat [data-testid="bot"]')) {
      const text = bot.innerText;
      const words = (text.split('\n')[0].match(/[A-Za-z]{4,}/g) || [])
        .filter((w) => w !== 'thinking' && !inQuestion(w));
      if (/tokens\/s/.test(text) && words.length) return { text, word: words[0] };
    }
    return null;
  }, null, { timeout: 60000, polling: 250 });
  Object.assign(seen, await answer.jsonValue());
  seen.evidence = await page.$$eval('#chat [data-testid="bot"]', (bots) => bots.map((b) => ({
    seenAt: (b.innerText.match(/seen at [^\n]*/) || [''])[0],
    thumbs: [...b.querySelectorAll('img.evidence-thumb')].map((img) => img.complete && img.getBoundingClientRect().width),
  })).filter((e) => e.seenAt));

  await page.locator('#chat').screenshot({ path: path.join(outDir, 'history-chat.png') });

  // 2. the History tab: the word finds the answer, with its thumbnail
  await page.getByRole('tab', { name: 'History' }).click();
  await page.waitForSelector('#history-search', { timeout: 10000 });
  const found = await search(page, seen.word, 10);
  check(found, `searching "${seen.word}" found nothing: ${await page.innerText('#history-results')}`);
  await page.waitForFunction(() => {
    const img = document.querySelector('#history-results tr.history-row img');
    return img && img.complete && img.naturalWidth > 0;
  }, null, { timeout: 10000, polling: 100 });
  seen.row = await page.innerText('#history-results tr.history-row');
  seen.thumbnail = await page.$eval('#history-results tr.history-row img',
    (img) => ({ naturalWidth: img.naturalWidth, src: img.src.slice(0, 23) }));
  seen.count = await page.innerText('#history-results .history-count');
  check(seen.row.toLowerCase().includes(seen.word.toLowerCase()), `the row lacks "${seen.word}": ${seen.row}`);
  check(/\d\d:\d\d:\d\d-\d\d:\d\d:\d\d|\d\d:\d\d:\d\d/.test(seen.row), `the row lacks its span: ${seen.row}`);
  await page.screenshot({ path: path.join(outDir, 'history.png') });

  // 3. a word nobody said finds nothing
  await page.fill('#history-text textarea, #history-text input', 'zqxjvw');
  await page.click('#history-search');
  await page.waitForFunction(() => /Nothing found|\b0 moments/.test(document.querySelector('#history-results').innerText),
    null, { timeout: 15000, polling: 100 }).catch(() => {});
  seen.none = await page.innerText('#history-results');
  check(/\b0 moments/.test(seen.none), `a word nobody said found something: ${seen.none}`);

  check(pageErrors.length === 0, `errors in the page: ${pageErrors.join('; ')}`);
});
