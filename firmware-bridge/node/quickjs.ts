/**
 * Runs scripts in QuickJS (quickjs-emscripten) with no host object but the firmware ABI's
 * `ctlHost`, and turns the engine's async work into synchronous calls by draining its job queue:
 * what a firmware does with the C QuickJS API. Used by the reference bridge, the runtime suite
 * and the benchmark.
 */
import { getQuickJS, type QuickJSContext, type QuickJSHandle, type QuickJSRuntime } from 'quickjs-emscripten';
import type { HostAbi } from '../abi.js';

export interface QuickJsEngine {
  vm: QuickJSContext;
  runtime: QuickJSRuntime;
  /** Evaluates a script (global code). Throws the engine's error as an Error. */
  evalScript(code: string, filename: string): void;
  /**
   * Evaluates an expression that yields a value or a Promise, drains jobs until it settles, and
   * returns the dumped value (JSON-able values; an ArrayBuffer comes back as a Uint8Array).
   */
  evalSync(expression: string): unknown;
  /** Calls `globalThis[name].handle(bytes)` synchronously (bytes in as ArrayBuffer, ArrayBuffer out). */
  callBytes(name: string, bytes: Uint8Array): Uint8Array;
  /** QuickJS heap in bytes now, and the highest value seen at any sample point so far. */
  memory(): { usedBytes: number; peakBytes: number };
  dispose(): void;
}

export interface QuickJsOptions {
  /** The host ABI exposed as `ctlHost` (omit for a bare engine). */
  abi?: HostAbi;
  memoryLimitBytes?: number;
}

/**
 * @example const qjs = await createQuickJsEngine({ abi }); qjs.evalScript(iife, 'ctl.iife.js');
 * qjs.evalSync('CTL.sha256Hex(CTL.utf8Encode("abc"))')
 */
export async function createQuickJsEngine(o: QuickJsOptions = {}): Promise<QuickJsEngine> {
  const QuickJS = await getQuickJS();
  const runtime = QuickJS.newRuntime();
  runtime.setMemoryLimit(o.memoryLimitBytes ?? 64 * 1024 * 1024);
  runtime.setMaxStackSize(1024 * 1024);
  const vm = runtime.newContext();
  let peak = 0;

  const usage = (): number => {
    const h = runtime.computeMemoryUsage();
    try {
      const u = vm.dump(h) as { memory_used_size: number };
      return u.memory_used_size;
    } finally {
      h.dispose();
    }
  };
  const sample = () => {
    const u = usage();
    if (u > peak) peak = u;
    return u;
  };

  const bytesOf = (h: QuickJSHandle): Uint8Array => {
    const life = vm.getArrayBuffer(h);
    try {
      return life.value.slice();
    } finally {
      life.dispose();
    }
  };
  const abOf = (u: Uint8Array) => vm.newArrayBuffer(u.slice().buffer);
  const isAbFn = vm.unwrapResult(vm.evalCode('(x) => x instanceof ArrayBuffer', 'is-ab.js'));
  const isArrayBuffer = (h: QuickJSHandle): boolean => {
    const r = vm.callFunction(isAbFn, vm.undefined, h);
    if (r.error) {
      r.error.dispose();
      return false;
    }
    const yes = vm.dump(r.value) === true;
    r.value.dispose();
    return yes;
  };

  if (o.abi) {
    const abi = o.abi;
    const host = vm.newObject();
    const fn = (name: string, f: (...args: QuickJSHandle[]) => QuickJSHandle | undefined) => {
      const h = vm.newFunction(name, (...args) => {
        try {
          return f(...args);
        } catch (e) {
          return { error: vm.newError(e instanceof Error ? e.message : String(e)) };
        }
      });
      vm.setProp(host, name, h);
      h.dispose();
    };
    fn('now', () => vm.newNumber(abi.now()));
    fn('randomBytes', (n) => abOf(abi.randomBytes(vm.getNumber(n!))));
    fn('storageGet', (k) => {
      const v = abi.storage.get(bytesOf(k!));
      return v === null ? vm.null : abOf(v);
    });
    fn('storagePut', (k, v) => {
      abi.storage.put(bytesOf(k!), bytesOf(v!));
      return vm.undefined;
    });
    fn('storageCas', (k, e, v) => {
      const expected = vm.typeof(e!) === 'object' && vm.dump(e!) === null ? null : bytesOf(e!);
      return abi.storage.compareAndSet(bytesOf(k!), expected, bytesOf(v!)) ? vm.true : vm.false;
    });
    fn('log', (level, message) => {
      abi.log(vm.getString(level!) as never, vm.getString(message!));
      return vm.undefined;
    });
    const counter = abi.monotonicCounter;
    if (counter) {
      fn('counterRead', () => vm.newNumber(counter.read()));
      fn('counterIncrement', () => vm.newNumber(counter.increment()));
    }
    vm.setProp(vm.global, 'ctlHost', host);
    host.dispose();
  }

  /** Drains jobs until `promise` settles; the engine has no timers, so "pending with no jobs" is a deadlock. */
  function settle(h: QuickJSHandle): QuickJSHandle {
    for (;;) {
      const state = vm.getPromiseState(h);
      if (state.type === 'fulfilled') {
        if (state.notAPromise) return h;
        h.dispose();
        return state.value;
      }
      if (state.type === 'rejected') {
        const err = vm.dump(state.error);
        state.error.dispose();
        h.dispose();
        throw new Error(
          `QuickJS: ${typeof err === 'object' && err ? ((err as any).message ?? JSON.stringify(err)) : String(err)}`,
        );
      }
      const r = runtime.executePendingJobs();
      sample();
      if (r.error) {
        const err = vm.dump(r.error);
        r.error.dispose();
        throw new Error(`QuickJS job failed: ${JSON.stringify(err)}`);
      }
      if (r.value === 0 && vm.getPromiseState(h).type === 'pending') {
        h.dispose();
        throw new Error('QuickJS: the promise is pending and no job is left (a host callback was expected)');
      }
    }
  }

  return {
    vm,
    runtime,
    evalScript(code, filename) {
      const r = vm.evalCode(code, filename, { type: 'global' });
      if (r.error) {
        const err = vm.dump(r.error);
        r.error.dispose();
        throw new Error(`QuickJS: ${filename}: ${JSON.stringify(err)}`);
      }
      r.value.dispose();
      sample();
    },
    evalSync(expression) {
      const r = vm.evalCode(`(${expression})`, 'eval.js', { type: 'global' });
      if (r.error) {
        const err = vm.dump(r.error);
        r.error.dispose();
        throw new Error(`QuickJS: ${JSON.stringify(err)}`);
      }
      const h = settle(r.value);
      try {
        return vm.typeof(h) === 'object' && isArrayBuffer(h) ? bytesOf(h) : vm.dump(h);
      } finally {
        h.dispose();
      }
    },
    callBytes(name, bytes) {
      const obj = vm.getProp(vm.global, name);
      const handle = vm.getProp(obj, 'handle');
      const arg = abOf(bytes);
      const r = vm.callFunction(handle, obj, arg);
      arg.dispose();
      handle.dispose();
      obj.dispose();
      if (r.error) {
        const err = vm.dump(r.error);
        r.error.dispose();
        throw new Error(`QuickJS: ${JSON.stringify(err)}`);
      }
      const out = settle(r.value);
      try {
        return bytesOf(out);
      } finally {
        out.dispose();
      }
    },
    memory() {
      const used = sample();
      return { usedBytes: used, peakBytes: peak };
    },
    dispose() {
      isAbFn.dispose();
      vm.dispose();
      runtime.dispose();
    },
  };
}
