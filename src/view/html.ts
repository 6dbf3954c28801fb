// Small helpers both pages share. Every text from a log or a results file goes through `escape`:
// those files hold model output, which may contain markup.

export function escape(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

export function seconds(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

/** The colours (light and dark, following the system), type, and the stat cells and usage table both pages show. */
export const THEME_STYLE = `
:root { color-scheme: light dark; --bg: #fff; --fg: #1d1f23; --muted: #667; --line: #d8dae0; --panel: #f5f6f8; --accent: #2557d6; --bad: #b3261e; --good: #1b7f3b; --mark: #ffe58a; }
@media (prefers-color-scheme: dark) { :root { --bg: #16181c; --fg: #e3e5e8; --muted: #99a; --line: #33363d; --panel: #1f2227; --accent: #7aa2ff; --bad: #ff8a80; --good: #6fd38f; --mark: #6b5a00; } }
body { margin: 0; font: 14px/1.45 system-ui, sans-serif; background: var(--bg); color: var(--fg); }
header, main { max-width: 1100px; margin: 0 auto; padding: 12px 20px; }
h1 small { color: var(--muted); font-weight: normal; font-size: 60%; }
h2 { font-size: 15px; margin: 8px 0 4px; } h3 { font-size: 14px; margin: 12px 0 4px; } h4 { font-size: 13px; margin: 8px 0 2px; color: var(--muted); }
.status { font-size: 12px; border-radius: 10px; padding: 1px 8px; border: 1px solid currentColor; font-weight: normal; }
.status-completed { color: var(--good); } .status-forced { color: var(--accent); }
.stats { display: flex; flex-wrap: wrap; gap: 8px; margin: 8px 0; }
.stat { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 6px 12px; display: flex; flex-direction: column; }
.stat .value { font-size: 18px; font-weight: 600; } .stat .label { color: var(--muted); font-size: 12px; }
table.usage { border-collapse: collapse; margin: 8px 0; } table.usage td, table.usage th { border: 1px solid var(--line); padding: 3px 8px; text-align: right; } table.usage td:first-child { text-align: left; }
`;
