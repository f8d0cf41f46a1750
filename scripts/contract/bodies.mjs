// Writes a TypeScript module that assigns every response body the test suite recorded to the
// type the generated client (openapi-typescript) gives that operation's answer. tsc then
// refuses any body the client would mistype: a missing required field, a field the document
// does not name (excess property check), a value of the wrong type.
//
//   node bodies.mjs <recorded dir> <out.ts>
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [dir, out] = process.argv.slice(2);
const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();
const lines = ['import type { components, paths } from "./api";', ""];
const ops = new Set();
for (const [i, f] of files.entries()) {
  const r = JSON.parse(readFileSync(join(dir, f), "utf8"));
  // An answer's body, or the data of a live event (typed by the schema x-event-data names).
  const what = r.schema ? `event data ${r.schema}` : `${r.method.toUpperCase()} ${r.path} → ${r.status}`;
  const type = r.schema
    ? `components["schemas"][${JSON.stringify(r.schema)}]`
    : `paths[${JSON.stringify(r.path)}][${JSON.stringify(r.method)}]["responses"][${r.status}]["content"][${JSON.stringify(r.content_type)}]`;
  lines.push(`// ${what} (${f})`);
  lines.push(`export const body${i}: ${type} = ${JSON.stringify(r.body)};`);
  ops.add(what);
}
writeFileSync(out, lines.join("\n") + "\n");
console.log(`${files.length} bodies of ${ops.size} operation answers`);
