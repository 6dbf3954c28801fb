// Builtins captured before any model code runs. Model code may replace `JSON.stringify`,
// `Array.prototype.push` or `Object.keys`; the prelude keeps working because it only ever calls
// the originals captured here (the same idea as Node's internal "primordials").

const uncurry =
  <T, A extends unknown[], R>(method: (this: T, ...args: A) => R) =>
  (self: T, ...args: A): R =>
    Reflect.apply(method, self, args) as R;

export const ReflectApply = Reflect.apply;
export const ReflectOwnKeys = Reflect.ownKeys;
export const ObjectDefineProperty = Object.defineProperty;
export const ObjectGetOwnPropertyNames = Object.getOwnPropertyNames;
export const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
export const ObjectGetPrototypeOf = Object.getPrototypeOf;
export const ObjectFreeze = Object.freeze;
export const ObjectIsFrozen = Object.isFrozen;
export const ObjectCreate = Object.create;
export const ObjectPrototypeToString = uncurry(Object.prototype.toString);
export const ObjectPrototypeHasOwnProperty = uncurry(Object.prototype.hasOwnProperty);
export const ArrayIsArray = Array.isArray;
export const ArrayBufferIsView = ArrayBuffer.isView;
export const ArrayPrototypePush = uncurry(Array.prototype.push) as <T>(array: T[], ...items: T[]) => number;
export const ArrayPrototypeJoin = uncurry(Array.prototype.join) as (array: unknown[], separator?: string) => string;
export const ArrayPrototypeFilter = uncurry(Array.prototype.filter) as <T>(
  array: T[],
  predicate: (value: T) => boolean,
) => T[];
export const ArrayPrototypeSort = uncurry(Array.prototype.sort) as <T>(array: T[]) => T[];
export const StringPrototypeSlice = uncurry(String.prototype.slice);
export const StringPrototypeSplit = uncurry(String.prototype.split) as unknown as (s: string, separator: string) => string[];
export const StringPrototypeTrim = uncurry(String.prototype.trim);
export const StringPrototypeIncludes = uncurry(String.prototype.includes);
export const StringPrototypeStartsWith = uncurry(String.prototype.startsWith);
export const StringPrototypeReplace = uncurry(String.prototype.replace) as (
  s: string,
  pattern: RegExp | string,
  replacement: string | ((match: string, ...groups: string[]) => string),
) => string;
export const RegExpPrototypeTest = uncurry(RegExp.prototype.test);
export const RegExpPrototypeToString = uncurry(RegExp.prototype.toString);
export const DatePrototypeToISOString = uncurry(Date.prototype.toISOString);
export const DatePrototypeGetTime = uncurry(Date.prototype.getTime);
export const FunctionPrototypeToString = uncurry(Function.prototype.toString);
export const SymbolPrototypeToString = uncurry(Symbol.prototype.toString);
export const BigIntPrototypeToString = uncurry(BigInt.prototype.toString);
export const MapPrototypeForEach = uncurry(Map.prototype.forEach) as (
  map: Map<unknown, unknown>,
  callback: (value: unknown, key: unknown) => void,
) => void;
export const SetPrototypeForEach = uncurry(Set.prototype.forEach) as (
  set: Set<unknown>,
  callback: (value: unknown) => void,
) => void;
export const MapPrototypeGetSize = uncurry(ObjectGetOwnPropertyDescriptor(Map.prototype, 'size')!.get!) as (
  map: Map<unknown, unknown>,
) => number;
export const SetPrototypeGetSize = uncurry(ObjectGetOwnPropertyDescriptor(Set.prototype, 'size')!.get!) as (
  set: Set<unknown>,
) => number;
export const PromisePrototypeThen = uncurry(Promise.prototype.then) as (
  promise: Promise<unknown>,
  onFulfilled: (value: unknown) => void,
  onRejected: (reason: unknown) => void,
) => Promise<unknown>;
export const JSONStringify = JSON.stringify;
export const JSONParse = JSON.parse;
export const NumberParseInt = Number.parseInt;
export const MathMax = Math.max;
export const StringCtor = String;
export const ErrorCtor = Error;
export const TypeErrorCtor = TypeError;
export const MapCtor = Map;
export const SetCtor = Set;
export const DateCtor = Date;
export const RegExpCtor = RegExp;
export const PromiseCtor = Promise;
export const WeakSetCtor = WeakSet;
export const WeakSetPrototypeHas = uncurry(WeakSet.prototype.has) as (set: WeakSet<object>, value: object) => boolean;
export const WeakSetPrototypeAdd = uncurry(WeakSet.prototype.add) as (set: WeakSet<object>, value: object) => WeakSet<object>;
export const WeakSetPrototypeDelete = uncurry(WeakSet.prototype.delete) as (set: WeakSet<object>, value: object) => boolean;
export const globalObject = globalThis;
