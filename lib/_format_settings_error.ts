import type { z } from "zod";

/** Placeholder: replaced by the settings helper (formats zod issues with paths and suggestions). */
export function formatSettingsError(error: z.ZodError, _input: unknown, what: string): Error {
  const issue = error.issues[0];
  const path = issue?.path.join(".") ?? "";
  return new TypeError(`Cannot create ${what} as '${path}' is invalid: ${issue?.message}`, { cause: error });
}
