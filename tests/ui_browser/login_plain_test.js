// A page with a login, in Debian's headless chromium: Gradio's login form refuses a wrong password and lets the
// right one in; a question carrying a markdown image, a markdown link and a bare URL shows as typed text in
// the chat (no <img>, no <a> to them), so the browser fetches nothing from them.
//
//   node tests/ui_browser/login_plain_test.js URL OUT_DIR USER PASSWORD EVIL_BASE
//
// Prints one JSON line with what it saw; exits 1 on the first failed check (OUT_DIR/failure.png).
'use strict';

const path = require('path');
const { check, run } = require('./browser');

const [url, outDir, user, password, evil] = process.argv.slice(2);
if (!url || !outDir || !user || !password || !evil) {
  console.error('usage: node login_plain_test.js URL OUT_DIR USER PASSWORD EVIL_BASE');
  process.exit(2);
}

async function logIn(page, secret) {
  const fields = page.locator('input:visible, textarea:visible');
  await fields.first().waitFor({ timeout: 30000 });
  await page.locator('input[type="password"]').fill(secret);
  await fields.first().fill(user);
  await page.locator('button:has-text("Login")').click();
}

run('login-plain', outDir, { width: 1280, height: 900 }, async (page, seen, pageErrors) => {
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 30000 });
  await logIn(page, `${password}-wrong`);
  await page.waitForFunction(() => /incorrect credentials/i.test(document.body.innerText), null, { timeout: 20000 });
  seen.wrongPassword = 'refused';
  check(!(await page.$('#chat')), 'the page showed its controls after a wrong password');
  await logIn(page, password);
  await page.waitForSelector('#chat', { timeout: 30000 });
  seen.loggedIn = true;

  const question = `look ![pixel](${evil}/image.png) and [go](${evil}/link) and ${evil}/bare ok?`;
  await page.fill('#ask-box textarea', question);
  await page.press('#ask-box textarea', 'Enter');
  await page.waitForFunction(() => [...document.querySelectorAll('#chat [data-testid="user"]')]
    .some((el) => el.innerText.includes('look')), null, { timeout: 30000, polling: 200 });
  const shown = await page.$$eval('#chat [data-testid="user"]', (els) => els.map((el) => ({
    text: el.innerText,
    images: [...el.querySelectorAll('img')].map((img) => img.getAttribute('src')),
    links: [...el.querySelectorAll('a')].map((a) => a.getAttribute('href')),
  })));
  seen.question = shown.find((m) => m.text.includes('look'));
  check(seen.question.text.includes(`![pixel](${evil}/image.png)`), `not shown as typed: ${seen.question.text}`);
  check(seen.question.images.length === 0, `images in the question: ${seen.question.images}`);
  check(seen.question.links.length === 0, `links in the question: ${seen.question.links}`);
  seen.chatImagesFromEvil = await page.$$eval('img', (imgs, base) =>
    imgs.filter((img) => (img.getAttribute('src') || '').startsWith(base)).length, evil);
  check(seen.chatImagesFromEvil === 0, 'an image from the outside URL is on the page');
  await page.waitForTimeout(1500); // time for a fetch that should not happen
  check(pageErrors.length === 0, `errors in the page: ${pageErrors.join('; ')}`);
  await page.screenshot({ path: path.join(outDir, 'login-plain.png'), fullPage: false });
});
