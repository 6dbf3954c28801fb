import { ConfigurationError } from '../errors.js';
import type { ToolSpec } from '../lm/types.js';
import type { AnyTool } from './define.js';

/** The tools available to a run, by name. */
export class ToolRegistry {
  private readonly tools = new Map<string, AnyTool>();

  constructor(tools: Iterable<AnyTool> = []) {
    for (const tool of tools) this.register(tool);
  }

  /** Adds a tool; a second tool with the same name is an error. */
  register(tool: AnyTool): this {
    if (this.tools.has(tool.name)) throw new ConfigurationError(`A tool named "${tool.name}" is already registered; tool names must be unique.`);
    this.tools.set(tool.name, tool);
    return this;
  }

  get(name: string): AnyTool | undefined {
    return this.tools.get(name);
  }

  has(name: string): boolean {
    return this.tools.has(name);
  }

  names(): string[] {
    return [...this.tools.keys()];
  }

  get size(): number {
    return this.tools.size;
  }

  /** OpenAI function definitions for all tools, or for the named subset (unknown names are an error). */
  definitions(names?: string[]): ToolSpec[] {
    if (!names) return [...this.tools.values()].map((tool) => tool.spec);
    return names.map((name) => {
      const tool = this.tools.get(name);
      if (!tool) throw new ConfigurationError(`No tool named "${name}". Registered tools: ${this.names().join(', ') || 'none'}.`);
      return tool.spec;
    });
  }
}
