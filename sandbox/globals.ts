// The globals model code sees: the scaffold (print, FINAL, llm_query, context_0, ...), defined as
// accessors whose assignments last one block, and the model's own variables, listed in reports.
import { REPORT_LIMITS, RESERVED_SESSION_NAMES, SESSION_NAME_PREFIXES, clip } from '../src/sandbox/shared.js';
import type { BlockState } from './block-state.js';
import { describeType } from './inspect.js';
import {
  ArrayPrototypeJoin,
  ArrayPrototypePush,
  ArrayPrototypeSort,
  ObjectDefineProperty,
  ObjectFreeze,
  ObjectGetOwnPropertyNames,
  ObjectHasOwn,
  ObjectIsFrozen,
  StringPrototypeStartsWith,
  TypeErrorCtor,
  accessorDescriptor,
  globalObject,
  newList,
  newRecord,
} from './primordials.js';

interface Variable {
  name: string;
  type: string;
}

/** The model's variables, sorted, at most REPORT_LIMITS.variables of them, with the total. */
interface VariableList {
  shown: Variable[];
  total: number;
}

export interface Globals {
  /** Defines (or gives a new value to) a scaffold name; loading the first session name reserves them all. */
  defineScaffold(name: string, value: unknown): void;
  /** Counts every global defined so far as built in: never listed as the model's. */
  markBuiltins(): void;
  /** A name model code can read: its own variable or a scaffold name. */
  isDefined(name: string): boolean;
  listVariables(): VariableList;
}

export function createGlobals(currentBlock: () => BlockState): Globals {
  const scaffoldNames = newRecord<true>();
  const scaffoldValues = newRecord<unknown>();
  const builtinNames = newRecord<true>();
  let sessionNamesReserved = false;

  function defineAccessor(name: string, value: unknown) {
    scaffoldValues[name] = value;
    if (scaffoldNames[name]) return;
    const getter = () => {
      const overrides = currentBlock().overrides;
      return name in overrides ? overrides[name] : scaffoldValues[name];
    };
    const setter = (replacement: unknown) => {
      currentBlock().overrides[name] = replacement;
    };
    try {
      ObjectDefineProperty(globalObject, name, accessorDescriptor(getter, setter));
    } catch {
      throw new TypeErrorCtor(
        `${name} cannot be loaded: model code already defined a variable with that name that cannot be replaced. ` +
          'Start a new session, or use a name other than context_N and history_N for variables.',
      );
    }
    scaffoldNames[name] = true;
  }

  // A `var context_3 = ...` in an early turn must not take a name a later turn needs.
  function reserveSessionNames() {
    sessionNamesReserved = true;
    for (let prefixIndex = 0; prefixIndex < SESSION_NAME_PREFIXES.length; prefixIndex++) {
      for (let index = 0; index < RESERVED_SESSION_NAMES; index++) {
        const name = `${SESSION_NAME_PREFIXES[prefixIndex]}${index}`;
        if (!scaffoldNames[name]) defineAccessor(name, undefined);
      }
    }
  }

  function isUserVariable(name: string) {
    return ObjectHasOwn(globalObject, name) && !builtinNames[name] && !scaffoldNames[name];
  }

  return {
    defineScaffold(name, value) {
      if (!sessionNamesReserved && isSessionName(name)) reserveSessionNames();
      defineAccessor(name, value);
    },
    markBuiltins() {
      const names = ObjectGetOwnPropertyNames(globalObject);
      for (let index = 0; index < names.length; index++) builtinNames[names[index]!] = true;
    },
    isDefined: (name) => isUserVariable(name) || scaffoldNames[name] === true,
    listVariables: () => listVariables(isUserVariable),
  };
}

function listVariables(isUserVariable: (name: string) => boolean): VariableList {
  const all = ObjectGetOwnPropertyNames(globalObject);
  const names = newList<string>();
  for (let index = 0; index < all.length; index++) if (isUserVariable(all[index]!)) ArrayPrototypePush(names, all[index]!);
  ArrayPrototypeSort(names);
  const shown = newList<Variable>();
  const count = names.length < REPORT_LIMITS.variables ? names.length : REPORT_LIMITS.variables;
  for (let index = 0; index < count; index++) ArrayPrototypePush(shown, describeVariable(names[index]!));
  return { shown, total: names.length };
}

function isSessionName(name: string) {
  for (let index = 0; index < SESSION_NAME_PREFIXES.length; index++) {
    if (StringPrototypeStartsWith(name, SESSION_NAME_PREFIXES[index]!)) return true;
  }
  return false;
}

// Reading the variable may run a getter or Proxy trap that throws: it is listed all the same.
function describeVariable(name: string): Variable {
  let type: string;
  try {
    type = describeType((globalObject as Record<string, unknown>)[name]);
  } catch {
    type = 'unknown';
  }
  const variable = newRecord<string>();
  variable.name = clip(name, REPORT_LIMITS.variableNameChars);
  variable.type = clip(type, REPORT_LIMITS.variableTypeChars);
  return variable as unknown as Variable;
}

/** "a, b and 3 more": the names a list shows, and how many it leaves out. */
export function variableNames(variables: VariableList): string {
  const names = newList<string>();
  for (let index = 0; index < variables.shown.length; index++) ArrayPrototypePush(names, variables.shown[index]!.name);
  const more = variables.total - variables.shown.length;
  return `${ArrayPrototypeJoin(names, ', ')}${more > 0 ? ` and ${more} more` : ''}`;
}

/** What SHOW_VARS prints. */
export function variablesText(variables: VariableList): string {
  if (variables.total === 0) return 'No variables defined yet.\n';
  const lines = newList<string>();
  for (let index = 0; index < variables.shown.length; index++) {
    const variable = variables.shown[index]!;
    ArrayPrototypePush(lines, `  ${variable.name}: ${variable.type}`);
  }
  const more = variables.total - variables.shown.length;
  if (more > 0) ArrayPrototypePush(lines, `  ... and ${more} more`);
  return `Variables:\n${ArrayPrototypeJoin(lines, '\n')}\n`;
}

/**
 * Scaffold values are shared by every block: nothing inside them may be changed by model code.
 * Iterative, so deeply nested JSON cannot overflow the stack.
 */
export function deepFreeze<T>(value: T): T {
  const pending = newList<unknown>();
  ArrayPrototypePush(pending, value);
  while (pending.length > 0) {
    const item = pending[pending.length - 1];
    pending.length -= 1;
    if (item === null || typeof item !== 'object' || ObjectIsFrozen(item)) continue;
    ObjectFreeze(item);
    const keys = ObjectGetOwnPropertyNames(item);
    for (let index = 0; index < keys.length; index++) ArrayPrototypePush(pending, (item as Record<string, unknown>)[keys[index]!]);
  }
  return value;
}
