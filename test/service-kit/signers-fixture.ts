/** SoftHSM for the signer tests, plus a raw probe that tries to read a private key's value. */
import { createRequire } from 'node:module';
import { createSoftHsm, SOFTHSM_MODULE } from '../helpers/softhsm.js';

export function createHsm() {
  const token = createSoftHsm(['ctl']);
  return {
    ...token,
    module: SOFTHSM_MODULE,
    /**
     * CKA_VALUE of the private key labelled `label`: the CKR_ code the token answers, or 'READ' if it gave the bytes.
     */
    readPrivateValue(label: string): string {
      const lib = createRequire(import.meta.url)('pkcs11js');
      const p = new lib.PKCS11();
      p.load(SOFTHSM_MODULE);
      try {
        p.C_Initialize();
      } catch {
        /* already initialised by the signers */
      }
      const slot = p.C_GetSlotList(true).find((s: Buffer) => p.C_GetTokenInfo(s).label.trim() === token.label);
      const session = p.C_OpenSession(slot, lib.CKF_SERIAL_SESSION);
      try {
        try {
          p.C_Login(session, lib.CKU_USER, token.pin);
        } catch {
          /* logged in already */
        }
        p.C_FindObjectsInit(session, [
          { type: lib.CKA_CLASS, value: lib.CKO_PRIVATE_KEY },
          { type: lib.CKA_LABEL, value: label },
        ]);
        const [key] = p.C_FindObjects(session, 1);
        p.C_FindObjectsFinal(session);
        p.C_GetAttributeValue(session, key, [{ type: lib.CKA_VALUE }]);
        return 'READ';
      } catch (e) {
        return /CKR_[A-Z_]+/.exec((e as Error).message)?.[0] ?? (e as Error).message;
      } finally {
        p.C_CloseSession(session);
      }
    },
  };
}
