// Sets and ends a watch from the page's "Watch for" section (`python -m app --ui --model tiny --video ...`) in
// headless chromium.
//
//   node tests/ui_browser/watches_test.js URL OUT_DIR
//
// Checks: an interval under 1 s is refused with its message and lists nothing; "Add watch" with a question, a name,
// every 2 s and an expiry says what it set and lists it (set by page, its end time); the stream's status then shows
// the watch's p_yes (the model checks it); End on it says so and the list forgets it. Prints one JSON line with
// what it saw; exits 1 with a message on the first failed check. Screenshots: OUT_DIR/watches.png (failure.png on
// a failure).
'use strict';

const path = require('path');
const { check, run } = require('./browser');

const [url, outDir] = process.argv.slice(2);
if (!url || !outDir) {
  console.error('usage: node watches_test.js URL OUT_DIR');
  process.exit(2);
}

// Clicks `button` and returns the section's message once it matches `expected` (the previous one stays meanwhile).
async function press(page, seen, button, expected) {
  await page.click(button);
  try {
    await page.waitForFunction((re) => new RegExp(re).test(document.querySelector('#watch-msg').innerText),
      expected.source, { timeout: 30000, polling: 100 });
  } finally {
    seen.lastMessage = await page.innerText('#watch-msg');
  }
  return seen.lastMessage;
}

run('watches', outDir, { width: 1280, height: 1400 }, async (page, seen, pageErrors) => {
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 30000 });
  await page.waitForSelector('#watch-question', { timeout: 30000 });
  seen.emptyList = await page.innerText('#watch-list');
  check(/No watches yet/.test(seen.emptyList), `the list is not empty at start: ${seen.emptyList}`);

  // 1. a refusal: every 0.5 s
  await page.fill('#watch-question textarea, #watch-question input', 'Is there a person at the door?');
  await page.fill('#watch-every input', '0.5');
  seen.refused = await press(page, seen, '#watch-add', /cannot add the watch/);
  check(/every must be 1 to 86400 seconds/.test(seen.refused), `refusal: ${seen.refused}`);
  check(!(await page.isVisible('#watch-list tr.watch-row')), 'a refused watch is listed');

  // 2. add: named, every 2 s, ends after 30 min
  await page.fill('#watch-every input', '2');
  await page.fill('#watch-expires input', '30');
  await page.fill('#watch-name textarea, #watch-name input', 'door-person');
  seen.added = await press(page, seen, '#watch-add', /^watching: /);
  check(seen.added.includes('door-person: “Is there a person at the door?” on all streams, every 2 s; ends at '),
    `added: ${seen.added}`);
  await page.waitForSelector('#watch-list tr.watch-row[data-watch="door-person"]', { timeout: 10000 });
  seen.row = await page.innerText('#watch-list tr.watch-row[data-watch="door-person"]');
  check(/Is there a person at the door\?/.test(seen.row) && /page/.test(seen.row), `row: ${seen.row}`);
  seen.questionAfter = await page.inputValue('#watch-question textarea, #watch-question input');
  check(seen.questionAfter === '', `the question box is not emptied: ${seen.questionAfter}`);

  // 3. the model checks it: the stream's status shows its latest p_yes
  await page.waitForFunction(() => /watches: door-person [01]\.\d\d/.test(document.querySelector('#status').innerText),
    null, { timeout: 60000, polling: 250 });
  seen.status = await page.innerText('#status');
  await page.screenshot({ path: path.join(outDir, 'watches.png'), fullPage: true });

  // 4. End it
  await page.click('#watch-end-name input');
  await page.click('[role="option"]:text-is("door-person")');
  seen.ended = await press(page, seen, '#watch-end', /watch door-person ended/);
  await page.waitForSelector('#watch-list tr.watch-row', { state: 'detached', timeout: 10000 });
  seen.listAfter = await page.innerText('#watch-list');

  check(pageErrors.length === 0, `errors in the page: ${pageErrors.join('; ')}`);
});
