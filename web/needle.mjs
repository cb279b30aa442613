// needle.mjs - Needle in the browser and in Node: the WebAssembly build of libneedle
// (make wasm -> web/dist/needle-core.mjs + .wasm) behind a small API.
//
//   import { Needle } from './needle.mjs';
//   const needle = await Needle.create();                 // loads the WebAssembly module
//   const model = needle.openModel(cactBytes);            // a .cact file's bytes (Uint8Array)
//   const session = model.openSession({ tools });         // tools: an array or its JSON text
//   const envelope = session.send('turn off the kitchen lights');
//   // envelope.function_calls -> [{ name: 'set_lights', arguments: { room: 'kitchen', on: false } }]
//
// Everything runs in the calling thread (the build is single-threaded); a turn blocks
// until the call is complete, so a page runs it from a worker or after a paint.
import createNeedleCore from './dist/needle-core.mjs';

export class NeedleError extends Error {}

export class Needle {
  // options: passed to the Emscripten module.  The module is built for browsers (web, worker);
  // in Node, hand it the .wasm bytes: Needle.create({ wasmBinary: fs.readFileSync(...) })
  static async create(options = {}) {
    const core = await createNeedleCore(options);
    return new Needle(core);
  }

  constructor(core) {
    this.core = core;
    const f = (name, ret, args) => core.cwrap(name, ret, args);
    this.fn = {
      error: f('needle_wasm_error', 'string', []),
      modelOpen: f('needle_wasm_model_open', 'number', ['number', 'number']),
      modelClose: f('needle_wasm_model_close', null, ['number']),
      sessionOpen: f('needle_wasm_session_open', 'number', ['number', 'string', 'string', 'number']),
      sessionClose: f('needle_wasm_session_close', null, ['number']),
      sessionReset: f('needle_wasm_session_reset', null, ['number']),
      send: f('needle_wasm_send', 'number', ['number', 'number', 'string']),
      free: f('needle_wasm_free', null, ['number']),
    };
  }

  // bytes: Uint8Array or ArrayBuffer holding a .cact file (copied into the model)
  openModel(bytes) {
    const data = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    const p = this.core._malloc(data.length);
    if (!p) throw new NeedleError('needle: out of memory for the model bytes');
    this.core.HEAPU8.set(data, p);
    const m = this.fn.modelOpen(p, data.length);
    this.core._free(p);
    if (!m) throw new NeedleError(this.fn.error());
    return new Model(this, m);
  }
}

class Model {
  constructor(needle, handle) {
    this.needle = needle;
    this.handle = handle;
  }

  // tools: an array of {name, description, parameters} or its JSON text; system: "date: ...; locale: ..."
  openSession({ tools = [], system = '', maxNewTokens = 0 } = {}) {
    if (!this.handle) throw new NeedleError('needle: the model is closed');
    const json = typeof tools === 'string' ? tools : JSON.stringify(tools);
    const s = this.needle.fn.sessionOpen(this.handle, json, system, maxNewTokens);
    if (!s) throw new NeedleError(this.needle.fn.error());
    return new Session(this.needle, s);
  }

  // every session opened on the model must be closed first
  close() {
    if (this.handle) this.needle.fn.modelClose(this.handle);
    this.handle = 0;
  }
}

class Session {
  constructor(needle, handle) {
    this.needle = needle;
    this.handle = handle;
  }

  turn(isToolResult, text) {
    if (!this.handle) throw new NeedleError('needle: the session is closed');
    const fn = this.needle.fn;
    const p = fn.send(this.handle, isToolResult ? 1 : 0, text);
    if (!p) throw new NeedleError(fn.error());
    const json = this.needle.core.UTF8ToString(p);
    fn.free(p);
    return JSON.parse(json);
  }

  // the user's request -> the turn's envelope (SPEC section 10), parsed
  send(text) { return this.turn(false, text); }

  // a tool's result (an object or its JSON text) as the next turn
  toolResult(result) { return this.turn(true, typeof result === 'string' ? result : JSON.stringify(result)); }

  reset() { if (this.handle) this.needle.fn.sessionReset(this.handle); }

  close() {
    if (this.handle) this.needle.fn.sessionClose(this.handle);
    this.handle = 0;
  }
}
