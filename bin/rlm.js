#!/usr/bin/env node
// Node 20 cannot run TypeScript: the CLI source is src/cli/, built into dist/ by `npm run build`.
import('../dist/cli.js');
