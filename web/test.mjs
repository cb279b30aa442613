// test.mjs - the WebAssembly build answers the README's request in Node (make wasm first):
//   node web/test.mjs      exits 0 when "turn off the kitchen lights" gives set_lights(kitchen, off)
// The model and tools are the bundled ones (models/needle-default.cact, models/tools.json),
// read as bytes and handed to the JavaScript API exactly as the demo page does.
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Needle } from './needle.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
let passed = 0, failed = 0;
function check(name, ok, detail = '') {
  console.log(`${ok ? 'ok     ' : 'not ok '} ${name}${ok || !detail ? '' : ': ' + detail}`);
  if (ok) passed++;
  else failed++;
}
const speed = (env, ms) => `${ms.toFixed(0)} ms, prefill ${Number(env.prefill_tps).toFixed(0)} tok/s, ` +
                           `decode ${Number(env.decode_tps).toFixed(0)} tok/s`;

const wasmBinary = await readFile(join(root, 'web/dist/needle-core.wasm'));
const needle = await Needle.create({ wasmBinary });
const model = needle.openModel(await readFile(join(root, 'models/needle-default.cact')));
const tools = JSON.parse(await readFile(join(root, 'models/tools.json'), 'utf8'));
const session = model.openSession({ tools });

const t0 = performance.now();
const env = session.send('turn off the kitchen lights');
const ms = performance.now() - t0;
const call = (env.function_calls || [])[0] || {};
check('envelope_is_a_call', env.success === true && env.type === 'call', JSON.stringify(env));
check('set_lights_kitchen_off', call.name === 'set_lights' && call.arguments && call.arguments.room === 'kitchen' &&
      call.arguments.on === false, JSON.stringify(env.function_calls));
console.log(`  first turn: ${speed(env, ms)}`);

// bad input is an error with a reason, never a crash
let msg = '';
try { needle.openModel(new Uint8Array([1, 2, 3])); } catch (e) { msg = String(e.message); }
check('bad_model_bytes_rejected', msg.length > 0, msg);
msg = '';
try { model.openSession({ tools: '[{"name": 5}]' }); } catch (e) { msg = String(e.message); }
check('bad_tools_rejected', msg.length > 0, msg);

// a second turn on a fresh conversation gives the same call (greedy decoding)
session.reset();
const t1 = performance.now();
const again = session.send('turn off the kitchen lights');
console.log(`  second turn (compiled code warm): ${speed(again, performance.now() - t1)}`);
check('reset_and_repeat_same_call', JSON.stringify(again.function_calls) === JSON.stringify(env.function_calls),
      JSON.stringify(again.function_calls));
session.close();
model.close();

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
