// Shared by heapfleet's browser tests (tests/web/e2e.mjs, tests/demo/
// demo-e2e.mjs): Debian's chromium through playwright-core, every console
// error, failed request and HTTP error collected, checks that time
// themselves and leave a screenshot when they fail.
import fs from "node:fs";
import path from "node:path";

export async function launch({ nm, chrome, outDir, viewport = { width: 1400, height: 900 } }) {
  const { chromium } = await import(path.join(nm, "playwright-core", "index.mjs"));
  const profileDir = fs.mkdtempSync(path.join(outDir, "chromium-profile-"));
  const ctx = await chromium.launchPersistentContext(profileDir, {
    executablePath: chrome,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
    viewport,
  });
  const page = ctx.pages()[0] || (await ctx.newPage());
  page.setDefaultTimeout(15000);
  const problems = [];
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console error: ${m.text()} (${JSON.stringify(m.location())})`); });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on("response", (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });

  // page.waitForFunction evaluates strings inside the page, which the UI's
  // Content-Security-Policy (no 'unsafe-eval') rightly refuses; poll from here.
  async function waitFor(fn, arg, timeout = 15000) {
    const end = Date.now() + timeout;
    for (;;) {
      if (await page.evaluate(fn, arg)) return;
      if (Date.now() > end) throw new Error(`timed out waiting for ${fn}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  let step = 0;
  async function shot(name, opts = { fullPage: true }) {
    const file = path.join(outDir, `${String(++step).padStart(2, "0")}-${name}.png`);
    await page.screenshot({ path: file, ...opts });
    return file;
  }
  const text = (sel) => page.locator(sel).first().innerText();
  const ms = (t0) => Math.round(performance.now() - t0);
  const results = [];
  // HF_E2E_ONLY=REGEX runs only the checks whose names match (for
  // development, and to see a check fail against an older UI).
  const only = process.env.HF_E2E_ONLY ? new RegExp(process.env.HF_E2E_ONLY) : null;
  async function check(name, fn) {
    if (only && !only.test(name)) return;
    const t0 = performance.now();
    try {
      await fn();
      results.push(`ok   ${name} (${ms(t0)} ms)`);
    } catch (e) {
      results.push(`FAIL ${name}: ${e.message}`);
      await shot(`FAILED-${name.replace(/\W+/g, "-")}`).catch(() => {});
      throw e;
    }
  }
  // Click a download button; the name and bytes the browser saved.
  async function grab(selector) {
    const [dl] = await Promise.all([page.waitForEvent("download"), page.click(selector)]);
    return { name: dl.suggestedFilename(), text: fs.readFileSync(await dl.path(), "latin1") };
  }
  async function finish() {
    console.log(results.join("\n"));
    if (problems.length) console.log("problems:\n  " + problems.join("\n  "));
    await ctx.close();
    fs.rmSync(profileDir, { recursive: true, force: true });
  }
  return { ctx, page, problems, waitFor, shot, text, ms, check, results, grab, finish };
}
