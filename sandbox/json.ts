// JSON text for everything the prelude sends out of the isolate (block reports, host calls, FINAL
// values). JSON.stringify cannot be used on these: it honours `toJSON` found anywhere on the
// prototype chain, so one `Object.prototype.toJSON = ...` in a block would rewrite every later
// report. This writer consults no `toJSON`, iterator or species, and enforces the bounds of one
// message while it writes, so an oversized or deeply nested value fails fast inside the isolate,
// before anything reaches the host.
import {
  ArrayIsArray,
  ArrayPrototypeJoin,
  ArrayPrototypePush,
  DatePrototypeGetTime,
  DatePrototypeToISOString,
  JSONStringify,
  NumberIsFinite,
  ObjectKeys,
  RangeErrorCtor,
  StringCtor,
  TypeErrorCtor,
  WeakSetCtor,
  WeakSetPrototypeAdd,
  WeakSetPrototypeDelete,
  WeakSetPrototypeHas,
  ifBrand,
  newList,
} from './primordials.js';

interface JsonLimits {
  /** Characters of JSON text one message may take. */
  maxChars: number;
  /** Levels of nested arrays and objects. */
  maxDepth: number;
}

/**
 * Writes `value` as JSON text. Plain data only: a function, symbol, BigInt, cycle, too deep a
 * nesting or too long a text throws a TypeError or RangeError that says which. Dates become ISO
 * strings (as with JSON.stringify); `undefined` properties are left out and array holes become null.
 */
export function toJsonText(value: unknown, limits: JsonLimits): string {
  const writer = new JsonWriter(limits);
  writer.write(value, 0);
  return ArrayPrototypeJoin(writer.parts, '');
}

class JsonWriter {
  readonly parts: string[] = newList<string>();
  private length = 0;
  private readonly open = new WeakSetCtor<object>();

  constructor(private readonly limits: JsonLimits) {}

  write(value: unknown, depth: number): void {
    switch (typeof value) {
      case 'string':
        return this.emit(JSONStringify(value) as string);
      case 'number':
        return this.emit(NumberIsFinite(value) ? StringCtor(value) : 'null');
      case 'boolean':
        return this.emit(value ? 'true' : 'false');
      case 'undefined':
        return this.emit('null');
      case 'object':
        if (value === null) return this.emit('null');
        return this.writeObject(value, depth);
      default:
        throw new TypeErrorCtor(`a ${typeof value} cannot be sent (only strings, numbers, booleans, null, arrays and plain objects)`);
    }
  }

  private writeObject(object: object, depth: number): void {
    const iso = dateText(object);
    if (iso !== undefined) return this.emit(iso);
    if (depth >= this.limits.maxDepth) {
      throw new RangeErrorCtor(`the value is nested more than ${this.limits.maxDepth} levels deep`);
    }
    if (WeakSetPrototypeHas(this.open, object)) throw new TypeErrorCtor('the value contains a circular reference');
    WeakSetPrototypeAdd(this.open, object);
    if (ArrayIsArray(object)) this.writeArray(object as unknown[], depth);
    else this.writeProperties(object as Record<string, unknown>, depth);
    WeakSetPrototypeDelete(this.open, object);
  }

  private writeArray(array: unknown[], depth: number): void {
    this.emit('[');
    const length = array.length;
    for (let index = 0; index < length; index++) {
      if (index > 0) this.emit(',');
      this.write(array[index], depth + 1);
    }
    this.emit(']');
  }

  private writeProperties(object: Record<string, unknown>, depth: number): void {
    this.emit('{');
    const keys = ObjectKeys(object);
    let written = 0;
    for (let index = 0; index < keys.length; index++) {
      const key = keys[index]!;
      const item = object[key];
      if (item === undefined) continue;
      if (written++ > 0) this.emit(',');
      this.emit(JSONStringify(key) as string);
      this.emit(':');
      this.write(item, depth + 1);
    }
    this.emit('}');
  }

  private emit(text: string): void {
    this.length += text.length;
    if (this.length > this.limits.maxChars) {
      throw new RangeErrorCtor(`the value is larger than the limit of ${this.limits.maxChars} characters of JSON for one host call`);
    }
    ArrayPrototypePush(this.parts, text);
  }
}

/** The ISO text of a real Date, as JSON.stringify writes it, or undefined for anything else. */
function dateText(object: object): string | undefined {
  const time = ifBrand(DatePrototypeGetTime, object);
  if (time === undefined) return undefined;
  return time === time ? (JSONStringify(DatePrototypeToISOString(object as Date)) as string) : 'null';
}
