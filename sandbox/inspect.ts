// A small, readable value formatter in the spirit of Node's util.inspect. It never runs model
// getters (accessors print as [Getter]) and never throws: whatever it cannot format prints as a tag.
import {
  ArrayBufferIsView,
  ArrayIsArray,
  ArrayPrototypeJoin,
  ArrayPrototypePush,
  BigIntPrototypeToString,
  DatePrototypeGetTime,
  DatePrototypeToISOString,
  FunctionPrototypeHasInstance,
  FunctionPrototypeToString,
  JSONStringify,
  MapPrototypeForEach,
  MapPrototypeGetSize,
  ObjectGetOwnPropertyDescriptor,
  ObjectGetPrototypeOf,
  ObjectPrototypeToString,
  PromiseCtor,
  ReflectOwnKeys,
  RegExpPrototypeGetFlags,
  RegExpPrototypeGetSource,
  SetPrototypeForEach,
  SetPrototypeGetSize,
  StringCtor,
  StringPrototypeCharCodeAt,
  StringPrototypeIncludes,
  StringPrototypeSlice,
  StringPrototypeStartsWith,
  SymbolPrototypeToString,
  SymbolToStringTag,
  WeakSetCtor,
  WeakSetPrototypeAdd,
  WeakSetPrototypeDelete,
  WeakSetPrototypeHas,
  descriptorValue,
  ifBrand,
  isError,
  newList,
} from './primordials.js';

const MAX_DEPTH = 3;
const MAX_ITEMS = 100;
const MAX_NESTED_STRING = 2_000;
const LINE_WIDTH = 80;
const MAX_NAME_CHARS = 100;

/** Formats a value for printing. Strings at the top level print raw, like console.log. */
export function inspect(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    return formatValue(value, 0, new WeakSetCtor(), '');
  } catch (error) {
    return `[Uninspectable: ${describeFailure(error)}]`;
  }
}

/**
 * A promise, or something that passes for one: a real Promise (by its prototype chain), an object
 * with its own `then` (a function, or a getter, which is not run), or one tagged "Promise". Reads
 * descriptors only, so no getter runs. A Proxy's traps do run (nothing can look at a Proxy without
 * them), so callers call this in the block's own time; a trap that throws counts as "no". Only own
 * properties count: a `then` model code put on Object.prototype must not make every object a promise.
 */
export function isPromiseLike(value: unknown): boolean {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false;
  try {
    if (FunctionPrototypeHasInstance(PromiseCtor, value)) return true;
    const then = ObjectGetOwnPropertyDescriptor(value, 'then');
    if (then !== undefined) {
      const data = descriptorValue(then);
      if (!data.found || typeof data.value === 'function') return true;
    }
    return descriptorValue(ObjectGetOwnPropertyDescriptor(value, SymbolToStringTag)).value === 'Promise';
  } catch {
    return false;
  }
}

/** Short type description used by SHOW_VARS and the variable list. */
export function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (ArrayIsArray(value)) return `array[${(value as unknown[]).length}]`;
  if (typeof value === 'string') return `string (${value.length} chars)`;
  if (typeof value === 'function') return 'function';
  if (typeof value !== 'object') return typeof value;
  try {
    const mapSize = ifBrand(MapPrototypeGetSize, value);
    if (mapSize !== undefined) return `Map(${mapSize})`;
    const setSize = ifBrand(SetPrototypeGetSize, value);
    if (setSize !== undefined) return `Set(${setSize})`;
    return constructorName(value) ?? 'object';
  } catch {
    return 'object';
  }
}

function describeFailure(error: unknown): string {
  try {
    return isError(error) ? (readOwnString(error, 'message') ?? 'Error') : typeof error;
  } catch {
    return 'unknown error';
  }
}

function constructorName(value: object): string | undefined {
  const proto = ObjectGetPrototypeOf(value) as object | null;
  if (proto === null) return '[Object: null prototype]';
  const ctor = descriptorValue(ObjectGetOwnPropertyDescriptor(proto, 'constructor')).value;
  if (typeof ctor !== 'function') return undefined;
  const name = descriptorValue(ObjectGetOwnPropertyDescriptor(ctor, 'name')).value;
  if (typeof name !== 'string' || name === '') return undefined;
  return name.length > MAX_NAME_CHARS ? `${StringPrototypeSlice(name, 0, MAX_NAME_CHARS)}...` : name;
}

function dateText(value: object): string | undefined {
  const time = ifBrand(DatePrototypeGetTime, value);
  if (time === undefined) return undefined;
  return time === time ? DatePrototypeToISOString(value as Date) : 'Invalid Date';
}

function regExpText(value: object): string | undefined {
  const source = ifBrand(RegExpPrototypeGetSource, value);
  if (source === undefined) return undefined;
  // flags reads properties model code may have replaced with throwing getters
  return `/${source}/${ifBrand(RegExpPrototypeGetFlags, value) ?? ''}`;
}

function isIdentifier(key: string): boolean {
  if (key.length === 0) return false;
  for (let index = 0; index < key.length; index++) {
    const code = StringPrototypeCharCodeAt(key, index);
    const letter = (code >= 65 && code <= 90) || (code >= 97 && code <= 122) || code === 95 || code === 36;
    const digit = code >= 48 && code <= 57;
    if (!letter && !(digit && index > 0)) return false;
  }
  return true;
}

function quote(text: string): string {
  const shown = text.length > MAX_NESTED_STRING ? StringPrototypeSlice(text, 0, MAX_NESTED_STRING) : text;
  const quoted = JSONStringify(shown) as string;
  return text.length > MAX_NESTED_STRING ? `${quoted}... (${text.length - MAX_NESTED_STRING} more chars)` : quoted;
}

function formatKey(key: string | symbol): string {
  if (typeof key === 'symbol') return `[${SymbolPrototypeToString(key)}]`;
  return isIdentifier(key) ? key : quote(key);
}

function formatPrimitive(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return quote(value);
    case 'number':
      return value === 0 && 1 / value < 0 ? '-0' : StringCtor(value);
    case 'bigint':
      return `${BigIntPrototypeToString(value)}n`;
    case 'boolean':
      return value ? 'true' : 'false';
    case 'undefined':
      return 'undefined';
    case 'symbol':
      return SymbolPrototypeToString(value);
    default:
      return value === null ? 'null' : undefined;
  }
}

function formatFunction(fn: Function): string {
  const shownName = descriptorValue(ObjectGetOwnPropertyDescriptor(fn, 'name')).value;
  const name = typeof shownName === 'string' ? StringPrototypeSlice(shownName, 0, MAX_NAME_CHARS) : '';
  let source = '';
  try {
    source = FunctionPrototypeToString(fn);
  } catch {
    // Some callables (revoked proxies) cannot be stringified.
  }
  const kind = StringPrototypeStartsWith(source, 'class') ? 'class' : 'Function';
  return name ? `[${kind}: ${name}]` : `[${kind} (anonymous)]`;
}

function formatValue(value: unknown, depth: number, seen: WeakSet<object>, indent: string): string {
  const primitive = formatPrimitive(value);
  if (primitive !== undefined) return primitive;
  if (typeof value === 'function') return formatFunction(value);
  const object = value as object;
  if (WeakSetPrototypeHas(seen, object)) return '[Circular]';
  const special = formatSpecial(object);
  if (special !== undefined) return special;

  const isArray = ArrayIsArray(object);
  const name = constructorName(object);
  if (depth > MAX_DEPTH) return isArray ? '[Array]' : `[${name ?? 'Object'}]`;

  WeakSetPrototypeAdd(seen, object);
  try {
    const childIndent = `${indent}  `;
    const child = (item: unknown) => formatValue(item, depth + 1, seen, childIndent);
    const container = isArray ? arrayContainer(object as unknown[], name, child) : objectContainer(object, name, child);
    return typeof container === 'string' ? container : layOut(container, indent);
  } finally {
    WeakSetPrototypeDelete(seen, object);
  }
}

/** Errors, dates, regular expressions and promises, which print as one piece; undefined for the rest. */
function formatSpecial(object: object): string | undefined {
  if (isError(object)) return formatError(object);
  const date = dateText(object);
  if (date !== undefined) return date;
  const regExp = regExpText(object);
  if (regExp !== undefined) return regExp;
  if (FunctionPrototypeHasInstance(PromiseCtor, object)) return 'Promise { <pending or settled> }';
  return undefined;
}

/** An array, map, set or object as its entries between brackets, to be laid out on one line or several. */
interface Container {
  prefix: string;
  open: string;
  close: string;
  entries: string[];
}

type FormatChild = (item: unknown) => string;

function arrayContainer(array: unknown[], name: string | undefined, child: FormatChild): Container {
  const entries = newList<string>();
  const shown = array.length < MAX_ITEMS ? array.length : MAX_ITEMS;
  for (let index = 0; index < shown; index++) {
    const descriptor = ObjectGetOwnPropertyDescriptor(array, index);
    ArrayPrototypePush(entries, descriptor ? formatProperty(descriptor, child) : '<empty>');
  }
  if (array.length > shown) ArrayPrototypePush(entries, `... ${array.length - shown} more items`);
  return { prefix: name && name !== 'Array' ? `${name}(${array.length}) ` : '', open: '[', close: ']', entries };
}

/** Maps and sets list their items first; every object lists its own enumerable properties. Typed arrays print as a tag. */
function objectContainer(object: object, name: string | undefined, child: FormatChild): Container | string {
  const entries = newList<string>();
  let prefix = name && name !== 'Object' ? `${name} ` : '';
  if (ifBrand(MapPrototypeGetSize, object) !== undefined) {
    prefix = `Map(${ifBrand(MapPrototypeGetSize, object)}) `;
    MapPrototypeForEach(object as Map<unknown, unknown>, (item, key) => {
      if (entries.length < MAX_ITEMS) ArrayPrototypePush(entries, `${child(key)} => ${child(item)}`);
    });
  } else if (ifBrand(SetPrototypeGetSize, object) !== undefined) {
    prefix = `Set(${ifBrand(SetPrototypeGetSize, object)}) `;
    SetPrototypeForEach(object as Set<unknown>, (item) => {
      if (entries.length < MAX_ITEMS) ArrayPrototypePush(entries, child(item));
    });
  } else if (ArrayBufferIsView(object)) {
    return `${name ?? 'TypedArray'}(${(object as unknown as ArrayLike<unknown>).length}) [...]`;
  } else {
    const tag = ObjectPrototypeToString(object);
    if (tag !== '[object Object]' && !name) prefix = `${tag} `;
  }
  pushProperties(object, entries, child);
  return { prefix, open: '{', close: '}', entries };
}

function pushProperties(object: object, entries: string[], child: FormatChild) {
  const keys = ReflectOwnKeys(object);
  let count = 0;
  for (let index = 0; index < keys.length; index++) {
    const key = keys[index]!;
    const descriptor = ObjectGetOwnPropertyDescriptor(object, key);
    if (!descriptor || !descriptor.enumerable) continue;
    if (++count > MAX_ITEMS) {
      ArrayPrototypePush(entries, `... ${keys.length - MAX_ITEMS} more properties`);
      break;
    }
    ArrayPrototypePush(entries, `${formatKey(key)}: ${formatProperty(descriptor, child)}`);
  }
}

/** One line when it fits in LINE_WIDTH (at this indent) and no entry spans lines; else one entry per line. */
function layOut({ prefix, open, close, entries }: Container, indent: string): string {
  if (entries.length === 0) return `${prefix}${open}${close}`;
  const singleLine = `${prefix}${open} ${ArrayPrototypeJoin(entries, ', ')} ${close}`;
  if (singleLine.length + indent.length <= LINE_WIDTH && !StringPrototypeIncludes(singleLine, '\n')) return singleLine;
  const childIndent = `${indent}  `;
  return `${prefix}${open}\n${childIndent}${ArrayPrototypeJoin(entries, `,\n${childIndent}`)}\n${indent}${close}`;
}

function formatProperty(descriptor: PropertyDescriptor, child: (item: unknown) => string): string {
  const data = descriptorValue(descriptor);
  if (data.found) return child(data.value);
  if (descriptor.get && descriptor.set) return '[Getter/Setter]';
  return descriptor.get ? '[Getter]' : '[Setter]';
}

function formatError(error: Error): string {
  const stack = readOwnString(error, 'stack');
  if (stack) return stack;
  const name = readOwnString(error, 'name') ?? 'Error';
  const message = readOwnString(error, 'message') ?? '';
  return message ? `${name}: ${message}` : name;
}

/** Reads a data property (own or inherited) without running getters. */
export function readOwnString(object: object, key: string): string | undefined {
  let current: object | null = object;
  for (let hops = 0; current !== null && hops < 8; hops++) {
    const descriptor = ObjectGetOwnPropertyDescriptor(current, key);
    if (descriptor) {
      const { value } = descriptorValue(descriptor);
      return typeof value === 'string' ? value : undefined;
    }
    current = ObjectGetPrototypeOf(current) as object | null;
  }
  return undefined;
}
