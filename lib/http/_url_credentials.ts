/**
 * Credentials in URLs (`http://user:password@host/`): found, and kept out of
 * anything shown or written. Private helper.
 *
 * @module
 */

/** True when a parsed URL carries a user name or a password. */
export function hasCredentials(url: URL): boolean {
  return url.username !== "" || url.password !== "";
}

/**
 * A parsed URL as it may be shown: user name and password replaced by `***`
 * (a user name can be a token too).
 *
 * @example
 * ```ts
 * import { withoutCredentials } from "./_url_credentials.ts";
 * console.assert(withoutCredentials(new URL("http://u:pw@a.test/x")) === "http://***@a.test/x");
 * ```
 */
export function withoutCredentials(url: URL): string {
  if (!hasCredentials(url)) return url.href;
  return `${url.protocol}//***@${url.host}${url.pathname}${url.search}${url.hash}`;
}

/**
 * Text with whatever looks like URL credentials (`//user:password@`, also
 * after `\\`, which WHATWG URLs read as `//`) replaced by `//***@`: for
 * messages and echoes of input that may not even parse.
 *
 * @example
 * ```ts
 * import { maskCredentials } from "./_url_credentials.ts";
 * console.assert(maskCredentials('{"url": "http://u:p@a.test/"}') === '{"url": "http://***@a.test/"}');
 * ```
 */
export function maskCredentials(text: string): string {
  return text.replace(/(\/\/|\\\\|\\\/\\\/)[^\s/\\?#"'<>]*@/g, "$1***@");
}
