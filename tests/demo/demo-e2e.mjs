// The demo's tour, walked in headless Chromium against the collector's UI
// (run-demo-e2e.sh starts the story): each feature the tour names is shown
// on the page the tour names. Fails on any console error or HTTP error.
//
//   node demo-e2e.mjs URL OUTDIR CHROMIUM NODE_MODULES [DOCS_SHOTS_DIR]
import fs from "node:fs";
import path from "node:path";
import assert from "node:assert/strict";
import { launch } from "../web/harness.mjs";

const [url, outDir, chrome, nm, docsDir] = process.argv.slice(2);
const base = url.endsWith("/") ? url : url + "/";

// The story first: the live part must have polled every node, and
// databend-q-1 must have restarted and been polled again (two lifetimes).
async function getJSON(p) {
  const r = await fetch(base + p.replace(/^\//, ""));
  if (!r.ok) throw new Error(`${p}: HTTP ${r.status}`);
  return r.json();
}
const t0 = Date.now();
for (;;) {
  let ready = false, why = "";
  try {
    const nodes = (await getJSON("/api/v1/nodes")).nodes;
    const failing = nodes.find((n) => n.name === "sr-be-4");
    const l = await getJSON("/api/v1/leaks?node=databend-q-1");
    const lts = ((l.nodes || [])[0] || {}).lifetimes || [];
    ready = failing?.status === "failing" && lts.length > 1;
    why = `sr-be-4 ${failing?.status}, databend-q-1 lifetimes ${lts.length}`;
  } catch (e) { why = e.message; }
  if (ready) break;
  if (Date.now() - t0 > 300000) throw new Error(`the story did not happen within 300 s: ${why}`);
  await new Promise((r) => setTimeout(r, 2000));
}
console.log(`story ready after ${Math.round((Date.now() - t0) / 1000)} s`);

// The README's screenshots: a 1280x800 window, the visible part only.
const { page, problems, waitFor, shot, text, check, finish } =
  await launch({ nm, chrome, outDir, viewport: { width: 1280, height: 800 } });
async function docShot(name) {
  const file = await shot(name, {});
  if (docsDir) fs.copyFileSync(file, path.join(docsDir, `demo-${name}.png`));
}

try {
  await check("fleet page: 8 nodes, the outlier named, the failing node's reason", async () => {
    await page.goto(base);
    await page.waitForSelector("[data-test=fleet-table] tbody tr");
    assert.equal(await text("[data-test=node-count]"), "8");
    const rows = await page.locator("[data-test=fleet-table] tbody tr").allInnerTexts();
    const sr4 = rows.find((r) => /^\s*sr-be-4/.test(r));
    assert.match(sr4, /failing/);
    assert.match(sr4, /HTML/i, `the reason is on the row: ${sr4}`);
    await page.waitForSelector("[data-test=outliers] tbody tr", { timeout: 60000 });
    const out = await text("[data-test=outliers]");
    assert.match(out, /sr-be-2[^\n]*heap total/, out);
    assert.match(out, /sr-be-2[^\n]*starrocks::JoinHashTable::build/, out);
    assert.doesNotMatch(out, /(doris-be-1|sr-be-1|rw-cn-1)[^\n]*heap total/, "steady nodes are not outliers");
    await docShot("fleet");
  });

  await check("fleet leaks page: the leak suspect named, the restart flagged", async () => {
    await page.goto(base + "#/leaks");
    await page.waitForSelector("[data-test=fleet-leaks] tbody tr", { timeout: 60000 });
    const rows = await page.locator("[data-test=fleet-leaks] tbody tr").allInnerTexts();
    const d2 = rows.find((r) => /^\s*doris-be-2/.test(r));
    assert.match(d2, /doris::TabletSchema::init_from_pb/, d2);
    for (const n of ["doris-be-1", "sr-be-1", "rw-cn-1"]) {
      const r = rows.find((x) => new RegExp(`^\\s*${n}\\b`).test(x));
      assert.match(r, /No steadily growing function/, `steady ${n}: ${r}`);
    }
    assert.match(rows.find((r) => /^\s*databend-q-1/.test(r)), /restarted/);
    await docShot("leaks");
  });

  await check("node page of the leak: history at once, the suspect named", async () => {
    await page.goto(base + "#/node/doris-be-2");
    await page.waitForSelector("#leaks [data-test=leaks] tbody tr", { timeout: 60000 });
    assert.ok(Number(await text("[data-test=snapshot-count]")) >= 12, "hours of backdated history");
    // Symbol coverage by bytes (issue 15): the demo's programs are on this
    // host, so all but a sliver of the heap is named.
    assert.match(await text("[data-test=node-named-bytes]"), /^(9\d|100)(\.\d+)?\s?%$/);
    // The suspect allocates; the call path names who keeps it (the cache).
    assert.match(await text("#leaks [data-test=leak-stacks] tbody tr"), /doris::TabletSchema::init_from_pb/);
    await docShot("node");
  });

  await check("node page of the restarted node: the restart marked on the chart", async () => {
    await page.goto(base + "#/node/databend-q-1");
    await page.waitForSelector("[data-test=lifetimes]", { timeout: 60000 });
    const marks = await page.locator(".chartwrap canvas").evaluate((c) => c.marks);
    assert.ok(marks.length >= 1 && marks.every((m) => m.label === "restart"), JSON.stringify(marks));
    assert.match(await text("[data-test=lifetimes]"), /2 process lifetimes; restarts at/);
    await docShot("restart");
  });

  await check("discrepancy page: the tracker disagreement shown", async () => {
    await page.goto(base + "#/discrepancy?node=sr-be-3");
    await page.waitForSelector("[data-test=categories] tbody tr", { timeout: 60000 });
    const q = (await page.locator("[data-test=categories] tbody tr").allInnerTexts()).find((r) => /^\s*query/.test(r));
    assert.match(q, /tracker under-counts/, q);
    assert.match(await text("[data-test=categories]"), /starrocks::JoinHashTable::build/);
    await docShot("discrepancy");
  });

  await check("node page of the failing node: the reason", async () => {
    await page.goto(base + "#/node/sr-be-4");
    await page.waitForSelector("[data-test=node-error]");
    assert.match(await text("[data-test=node-error]"), /HTML page instead of a heap dump/);
    assert.equal(await text("#leaks [data-test=notice]"), "Leak analysis needs 3 snapshots, 0 so far.");
  });

  await check("the tour's compare: what grew on doris-be-2 in three hours", async () => {
    await page.goto(base + "#/compare?a=" + encodeURIComponent("doris-be-2@-3h") + "&b=doris-be-2");
    await page.waitForSelector("[data-test=delta-table] tbody tr", { timeout: 60000 });
    assert.match(await text("[data-test=diff-delta]"), /^\+/);
    assert.match(await page.locator("[data-test=delta-table] tbody").innerText(), /TabletSchema/);
    await docShot("compare");
  });

  await check("function trend: the leaking function across time and the fleet", async () => {
    await page.goto(base + "#/function?fn=" + encodeURIComponent("TabletSchema::init_from_pb"));
    await page.waitForSelector("[data-test=fn-fleet] tbody tr", { timeout: 60000 });
    assert.match(await page.locator("[data-test=fn-fleet] tbody tr").first().innerText(), /doris-be-2/);
  });

  await check("take a snapshot now: the button polls the node and the count goes up", async () => {
    await page.goto(base + "#/node/sr-be-1");
    await page.waitForSelector("[data-test=snapshot-now]");
    const before = Number(await text("[data-test=snapshot-count]"));
    // A scheduled poll (every 10 s here) may be running at the press: the page
    // then says so (409), and the press is repeated.
    for (let i = 0; ; i++) {
      await page.click("[data-test=snapshot-now]");
      await page.waitForSelector("[data-test=snapnow-done], [data-test=snapnow-failed]", { timeout: 120000 });
      if (await page.locator("[data-test=snapnow-done]").count()) break;
      const why = await text("[data-test=snapnow-failed]");
      assert.ok(i < 3 && /^Already polling/.test(why), why);
      for (let k = problems.length - 1; k >= 0; k--) if (/^HTTP 409: .*\/snapshot$/.test(problems[k])) problems.splice(k, 1);
      await new Promise((r) => setTimeout(r, 2000));
    }
    assert.match(await text("[data-test=snapnow-done]"), /^New snapshot #\d+ taken/);
    assert.ok(Number(await text("[data-test=snapshot-count]")) >= before + 1, "the count went up");
    await page.click("[data-test=snapnow-link]");
    await page.waitForFunction(() => location.hash.startsWith("#/snapshot/"));
  });

  assert.deepEqual(problems, [], "no console errors, failed requests or HTTP errors");
} finally {
  await finish();
}
