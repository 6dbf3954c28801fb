// Builtins captured before any model code runs (the same idea as Node's internal "primordials").
// Model code may replace `JSON.stringify`, `Array.prototype.push`, `Reflect.apply` or
// `Symbol.hasInstance`, or add `Object.prototype.toJSON`; the prelude keeps working because it only
// calls the originals captured here, and only in ways that look nothing up at call time:
//
// - methods are uncurried with `bind` at capture time (a bound function calls its target directly,
//   unlike a wrapper that looks `Reflect.apply` up on every call);
// - nothing here takes an iterator, a species constructor, a regular expression or `toJSON` from a
//   model-reachable object: those are protocols model code can hook.

const { bind, call } = Function.prototype;
// uncurryThis(fn)(self, ...args) === fn.call(self, ...args), fixed now, whatever model code changes later.
const uncurryThis = bind.bind(call) as <T, A extends unknown[], R>(method: (this: T, ...args: A) => R) => (self: T, ...args: A) => R;

export const ReflectApply = Reflect.apply;
export const ReflectOwnKeys = Reflect.ownKeys;
export const ObjectDefineProperty = Object.defineProperty;
export const ObjectGetOwnPropertyNames = Object.getOwnPropertyNames;
export const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
export const ObjectGetPrototypeOf = Object.getPrototypeOf;
const ObjectSetPrototypeOf = Object.setPrototypeOf;
export const ObjectFreeze = Object.freeze;
export const ObjectIsFrozen = Object.isFrozen;
const ObjectCreate = Object.create;
export const ObjectKeys = Object.keys;
export const ObjectHasOwn = Object.hasOwn as (object: object, key: PropertyKey) => boolean;
export const ObjectPrototypeToString = uncurryThis(Object.prototype.toString);
export const ArrayIsArray = Array.isArray;
export const ArrayBufferIsView = ArrayBuffer.isView;
export const ArrayPrototypePush = uncurryThis(Array.prototype.push) as <T>(array: T[], ...items: T[]) => number;
export const ArrayPrototypeJoin = uncurryThis(Array.prototype.join) as (array: unknown[], separator?: string) => string;
export const ArrayPrototypeSort = uncurryThis(Array.prototype.sort) as <T>(array: T[]) => T[];
export const StringPrototypeSlice = uncurryThis(String.prototype.slice);
export const StringPrototypeTrim = uncurryThis(String.prototype.trim);
export const StringPrototypeIncludes = uncurryThis(String.prototype.includes);
export const StringPrototypeIndexOf = uncurryThis(String.prototype.indexOf);
export const StringPrototypeStartsWith = uncurryThis(String.prototype.startsWith);
export const StringPrototypeCharCodeAt = uncurryThis(String.prototype.charCodeAt);
export const DatePrototypeToISOString = uncurryThis(Date.prototype.toISOString);
export const DatePrototypeGetTime = uncurryThis(Date.prototype.getTime);
export const FunctionPrototypeToString = uncurryThis(Function.prototype.toString);
/** `value instanceof Ctor` without consulting a `Symbol.hasInstance` that model code may define on Ctor. */
export const FunctionPrototypeHasInstance = uncurryThis(Function.prototype[Symbol.hasInstance]) as (ctor: Function, value: unknown) => boolean;
export const SymbolToStringTag = Symbol.toStringTag;
export const SymbolPrototypeToString = uncurryThis(Symbol.prototype.toString);
export const BigIntPrototypeToString = uncurryThis(BigInt.prototype.toString);
export const MapPrototypeForEach = uncurryThis(Map.prototype.forEach) as (
  map: Map<unknown, unknown>,
  callback: (value: unknown, key: unknown) => void,
) => void;
export const SetPrototypeForEach = uncurryThis(Set.prototype.forEach) as (set: Set<unknown>, callback: (value: unknown) => void) => void;
export const MapPrototypeGetSize = uncurryThis(ObjectGetOwnPropertyDescriptor(Map.prototype, 'size')!.get!) as (map: Map<unknown, unknown>) => number;
export const SetPrototypeGetSize = uncurryThis(ObjectGetOwnPropertyDescriptor(Set.prototype, 'size')!.get!) as (set: Set<unknown>) => number;
/** Throws for anything that is not a real RegExp: a brand check no prototype change can fool. */
export const RegExpPrototypeGetSource = uncurryThis(ObjectGetOwnPropertyDescriptor(RegExp.prototype, 'source')!.get!) as (regexp: RegExp) => string;
export const RegExpPrototypeGetFlags = uncurryThis(ObjectGetOwnPropertyDescriptor(RegExp.prototype, 'flags')!.get!) as (regexp: RegExp) => string;
export const PromisePrototypeThen = uncurryThis(Promise.prototype.then) as (
  promise: Promise<unknown>,
  onFulfilled: (value: unknown) => void,
  onRejected: (reason: unknown) => void,
) => Promise<unknown>;
export const JSONStringify = JSON.stringify;
export const JSONParse = JSON.parse;
export const NumberParseInt = Number.parseInt;
export const NumberIsFinite = Number.isFinite;
export const MathMax = Math.max;
export const StringCtor = String;
export const ErrorCtor = Error;
export const TypeErrorCtor = TypeError;
export const RangeErrorCtor = RangeError;
export const PromiseCtor = Promise;
export const WeakSetCtor = WeakSet;
export const WeakSetPrototypeHas = uncurryThis(WeakSet.prototype.has) as (set: WeakSet<object>, value: object) => boolean;
export const WeakSetPrototypeAdd = uncurryThis(WeakSet.prototype.add) as (set: WeakSet<object>, value: object) => WeakSet<object>;
export const WeakSetPrototypeDelete = uncurryThis(WeakSet.prototype.delete) as (set: WeakSet<object>, value: object) => boolean;
export const globalObject = globalThis;

// ---- safe building blocks ------------------------------------------------------------------------

/**
 * An array with no prototype. Pushing into an ordinary empty array looks index "0" up the prototype
 * chain, where model code may have put a setter that swallows the value.
 */
export function newList<T>(): T[] {
  return ObjectSetPrototypeOf([], null) as T[];
}

/** An object with no prototype: nothing on Object.prototype (`model`, `toJSON`, `get`) shows through. */
export function newRecord<T>(): Record<string, T> {
  return ObjectCreate(null) as Record<string, T>;
}

/** Reads an own property only; inherited (possibly polluted) values count as absent. */
export function readOwn(object: object, key: string): unknown {
  return ObjectHasOwn(object, key) ? (object as Record<string, unknown>)[key] : undefined;
}

/**
 * A property descriptor on a null-prototype object: a descriptor literal would inherit `get`,
 * `set`, `value` or `writable` from a polluted Object.prototype.
 */
export function dataDescriptor(value: unknown, flags: { writable: boolean; enumerable: boolean; configurable: boolean }): PropertyDescriptor {
  const descriptor = newRecord<unknown>();
  descriptor.value = value;
  descriptor.writable = flags.writable;
  descriptor.enumerable = flags.enumerable;
  descriptor.configurable = flags.configurable;
  return descriptor as PropertyDescriptor;
}

export function accessorDescriptor(get: () => unknown, set: (value: unknown) => void): PropertyDescriptor {
  const descriptor = newRecord<unknown>();
  descriptor.get = get;
  descriptor.set = set;
  descriptor.enumerable = false;
  descriptor.configurable = false;
  return descriptor as PropertyDescriptor;
}

/** The `value` of a descriptor returned by getOwnPropertyDescriptor, if it is a data descriptor. */
export function descriptorValue(descriptor: PropertyDescriptor | undefined): { found: boolean; value: unknown } {
  if (descriptor === undefined || !ObjectHasOwn(descriptor, 'value')) return { found: false, value: undefined };
  return { found: true, value: descriptor.value };
}

/**
 * Calls a captured method that throws for any other kind of object (Map size, Date time, RegExp
 * source): a brand check no prototype change can fool. Undefined for anything else.
 */
export function ifBrand<T, R>(method: (value: T) => R, value: unknown): R | undefined {
  try {
    return method(value as T);
  } catch {
    return undefined;
  }
}

export function isError(value: unknown): value is Error {
  return value !== null && typeof value === 'object' && FunctionPrototypeHasInstance(ErrorCtor, value);
}

/** Splits text into lines without String.prototype.split, which consults a hookable Symbol.split. */
export function splitLines(text: string): string[] {
  const lines = newList<string>();
  let start = 0;
  for (;;) {
    const end = StringPrototypeIndexOf(text, '\n', start);
    if (end === -1) {
      ArrayPrototypePush(lines, StringPrototypeSlice(text, start));
      return lines;
    }
    ArrayPrototypePush(lines, StringPrototypeSlice(text, start, end));
    start = end + 1;
  }
}
