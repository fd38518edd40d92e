#!/usr/bin/env node
// The ctl-authority command: its bundle, made by scripts/bundle-packages.mjs (`npm run build` in a clone).
import '../dist/ctl-authority.mjs';
