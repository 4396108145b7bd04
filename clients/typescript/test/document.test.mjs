// The client cannot drift from the server: its operation table matches
// docs/openapi.json (every operation, verb and path), and src/openapi.ts is
// what the pinned openapi-typescript makes of the document today (the
// client's methods are typed by it: `npm run build` fails on a mismatch).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { NOT_CALLED, OPERATIONS, BatonClient } from "../dist/index.js";

const root = fileURLToPath(new URL("../../..", import.meta.url));
const document = JSON.parse(readFileSync(join(root, "docs/openapi.json"), "utf8"));

test("every operation of the document is in the client as the document says", () => {
  const documented = {};
  for (const [path, operations] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      documented[operation.operationId] = [method, path];
    }
  }
  assert.deepEqual(
    [...Object.keys(OPERATIONS), ...NOT_CALLED].sort(),
    Object.keys(documented).sort(),
  );
  for (const [operationId, [method, path]] of Object.entries(OPERATIONS)) {
    assert.deepEqual([method, path], documented[operationId], operationId);
    assert.equal(typeof BatonClient.prototype[operationId], "function", operationId);
  }
});

test("the types are what openapi-typescript makes of the document", () => {
  const generated = join(mkdtempSync(join(tmpdir(), "baton-types-")), "openapi.ts");
  execFileSync("bash", [join(root, "clients/typescript/generate-types.sh"), generated]);
  assert.equal(
    readFileSync(generated, "utf8"),
    readFileSync(join(root, "clients/typescript/src/openapi.ts"), "utf8"),
    "src/openapi.ts is stale: run clients/typescript/generate-types.sh",
  );
});
