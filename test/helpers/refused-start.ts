/**
 * What a service start that must be refused says: its error message (a start that succeeds is closed and fails the
 * test).
 */
export async function startRefusal(start: () => Promise<{ close(): Promise<unknown> }>): Promise<string> {
  let started: { close(): Promise<unknown> };
  try {
    started = await start();
  } catch (e) {
    return (e as Error).message;
  }
  await started.close();
  throw new Error('the start must be refused');
}
