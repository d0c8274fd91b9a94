/**
 * Suggest the valid name a typo was meant to be. Private helper of the
 * settings error messages.
 *
 * @module
 */

/**
 * Edit distance with adjacent transpositions (optimal string alignment), so a
 * swapped pair of letters (`concurrnecy`) costs one edit, as a typist expects.
 */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[] = new Array<number>(rows * cols).fill(0);
  for (let i = 0; i < rows; i++) d[i * cols] = i;
  for (let j = 0; j < cols; j++) d[j] = j;
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(
        d[(i - 1) * cols + j]! + 1,
        d[i * cols + j - 1]! + 1,
        d[(i - 1) * cols + j - 1]! + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, d[(i - 2) * cols + j - 2]! + 1);
      }
      d[i * cols + j] = best;
    }
  }
  return d[rows * cols - 1]!;
}

/**
 * Case and separators do not count: `min_concurrency`, `minConcurrency` and
 * `MIN_CONCURRENCY` are one name written three ways, and a user switching
 * between Scrapy's and politely's conventions should still get a suggestion.
 */
function normalize(name: string): string {
  return name.toLowerCase().replace(/[_\-\s]/g, "");
}

/**
 * The valid name closest to `name`, or `undefined` when none is close enough
 * to be a plausible typo (more than a third of the name would have to change).
 *
 * @param name The name that was not recognised.
 * @param candidates The names valid at that place.
 * @param maxEdits At most this many edits (case and separators aside), when
 *   a suggestion decides more than the wording of an error. @default a third of the name, at least 2
 * @returns The suggestion, if any.
 */
export function closestName(
  name: string,
  candidates: Iterable<string>,
  maxEdits?: number,
): string | undefined {
  const wanted = normalize(name);
  const limit = Math.min(Math.max(2, Math.floor(wanted.length / 3)), maxEdits ?? Infinity);
  let best: string | undefined;
  let bestScore = Infinity;
  let bestRaw = Infinity;
  for (const candidate of candidates) {
    if (candidate === name) continue;
    const score = editDistance(wanted, normalize(candidate));
    if (score > limit) continue;
    // Ties go to the spelling closest to what was typed (same convention).
    const raw = editDistance(name, candidate);
    if (score < bestScore || (score === bestScore && raw < bestRaw)) {
      best = candidate;
      bestScore = score;
      bestRaw = raw;
    }
  }
  return best;
}
