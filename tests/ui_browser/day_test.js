// Drives the History tab's Day view of a page that keeps a timeline (`python -m app --ui --timeline FILE ...`)
// in headless chromium.
//
//   node tests/ui_browser/day_test.js URL OUT_DIR
//
// Checks: History, then Day, then Draw (again until the standing question's answers are in the timeline) shows a
// strip for stream a with answer segments; a real mouse click on one shows, under the strips, that moment's
// thumbnail (an inline data: JPEG that loaded) and its answer's text. Prints one JSON line with what it saw (the
// strip labels, the clicked segment's key and title, the detail's text, moment and thumbnail); exits 1 with a
// message on the first failed check. Then the Recap view of the same page: Recap (again until a run of answers is
// in) lists the period's lines, each with its kind, the moments it cites, its text and, for some, a thumbnail that
// loaded (in `seen.recap`). Screenshots: OUT_DIR/day.png, recap.png, failure.png.
'use strict';

const path = require('path');
const { check, run } = require('./browser');

const [url, outDir] = process.argv.slice(2);
if (!url || !outDir) {
  console.error('usage: node day_test.js URL OUT_DIR');
  process.exit(2);
}

run('day', outDir, { width: 1280, height: 800 }, async (page, seen, pageErrors) => {
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 30000 });
  await page.waitForSelector('#chat', { timeout: 30000 });
  await page.getByRole('tab', { name: 'History' }).click();
  await page.getByRole('tab', { name: 'Day', exact: true }).click();
  await page.waitForSelector('#day-draw', { timeout: 10000 });
  await page.locator('#day-period').click();
  await page.getByRole('option', { name: 'last 1 h' }).click();

  // 1. Draw until stream a's strip holds answer segments (the timeline is written a moment after each answer)
  let drawn = false;
  for (let i = 0; i < 20 && !drawn; i++) {
    await page.click('#day-draw');
    try {
      await page.waitForSelector('#day-strips .day-seg[data-kind="answer"]', { timeout: 3000 });
      drawn = true;
    } catch (err) {
      if (!/Timeout/.test(String(err))) throw err;
    }
  }
  check(drawn, `no answer segment was drawn: ${await page.innerText('#day-strips')}`);
  seen.labels = await page.$$eval('#day-strips .day-label', (labels) => labels.map((l) => l.innerText));

  // 2. a real click on the newest answer segment: what is at that point is what was clicked
  const target = await page.evaluate(() => {
    const segs = [...document.querySelectorAll('#day-strips .day-seg[data-kind="answer"]')];
    const box = segs[segs.length - 1].getBoundingClientRect();
    const x = box.left + box.width / 2;
    const y = box.top + box.height / 2;
    const hit = document.elementFromPoint(x, y).closest('[data-seg]');
    return { x, y, seg: hit.dataset.seg, title: hit.title, kind: hit.dataset.kind };
  });
  seen.clicked = target;
  await page.mouse.click(target.x, target.y);
  await page.waitForSelector('#day-detail .day-detail', { timeout: 15000 });
  await page.waitForFunction(() => {
    const img = document.querySelector('#day-detail .day-detail img');
    return img && img.complete && img.naturalWidth > 0;
  }, null, { timeout: 10000, polling: 100 }).catch(() => {});
  seen.detail = await page.$eval('#day-detail .day-detail', (d) => ({
    moment: d.dataset.moment,
    text: (d.querySelector('.day-text') || {}).innerText || '',
    all: d.innerText,
    image: d.querySelector('img') ? { naturalWidth: d.querySelector('img').naturalWidth,
      src: d.querySelector('img').src.slice(0, 23) } : null,
  }));
  await page.screenshot({ path: path.join(outDir, 'day.png') });
  check(seen.detail.image && seen.detail.image.naturalWidth > 0, `no thumbnail shown: ${seen.detail.all}`);

  // 3. the Recap view: the period's lines, a run of answers among them, with a thumbnail that loaded
  await page.getByRole('tab', { name: 'Recap', exact: true }).click();
  await page.waitForSelector('#recap-run', { timeout: 10000 });
  await page.locator('#recap-period').click();
  await page.getByRole('option', { name: 'last 1 h' }).click();
  let listed = false;
  for (let i = 0; i < 20 && !listed; i++) {
    await page.click('#recap-run');
    try {
      await page.waitForSelector('#recap-lines .recap-line[data-kind="answers"]', { timeout: 3000 });
      listed = true;
    } catch (err) {
      if (!/Timeout/.test(String(err))) throw err;
    }
  }
  check(listed, `no run of answers in the recap: ${await page.innerText('#recap-lines')}`);
  await page.waitForFunction(() => [...document.querySelectorAll('#recap-lines img')]
    .some((img) => img.complete && img.naturalWidth > 0), null, { timeout: 10000, polling: 100 }).catch(() => {});
  seen.recap = await page.$eval('#recap-lines .recap-view', (view) => ({
    head: (view.querySelector('.recap-head') || {}).innerText || '',
    lines: [...view.querySelectorAll('.recap-line')].map((line) => ({
      kind: line.dataset.kind,
      moments: line.dataset.moments,
      stream: line.querySelector('.recap-stream').innerText,
      text: line.querySelector('.recap-text').innerText,
      image: line.querySelector('img') ? line.querySelector('img').naturalWidth : null,
    })),
  }));
  await page.screenshot({ path: path.join(outDir, 'recap.png') });
  check(seen.recap.lines.some((line) => line.image > 0), `no thumbnail loaded in the recap: ${seen.recap.head}`);
  check(pageErrors.length === 0, `errors in the page: ${pageErrors.join('; ')}`);
});
