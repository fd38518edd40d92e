// Type-level check, run by `npm run typecheck` against the source and by
// express-request.test.ts against the shipped declarations: after `ctl()`, an Express handler
// reads `req.ctl` with its fields typed (spec §4.4 middleware row), with no cast.
import express from 'express';
import { ctl, type CtlRequestState } from '../../src/index.js';

const app = express();
app.post(
  '/pay',
  ctl({ amount: '30', currency: 'USD', jwksUrl: 'https://authority.example/.well-known/ctl-keys.json' }),
  (req, res) => {
    const state: CtlRequestState | undefined = req.ctl;
    if (!req.ctl) return res.status(500).end();
    const grantId: string = req.ctl.grant.grantId;
    const budgetId: string = req.ctl.sba.authorization.budgetId;
    const paid: { amount: string; currency: string; valid: true } = {
      amount: req.ctl.amount,
      currency: req.ctl.currency,
      valid: req.ctl.valid,
    };
    return res.json({ grantId, budgetId, paid, state });
  },
);
