/**
 * Fixed-size columns of numbers on one ring: the per-scope history of the
 * dashboard. Private helper.
 *
 * @module
 */

/** The columns of a scope's time series, one number per tick. */
export const SERIES_COLUMNS = [
  "sent",
  "done",
  "errors",
  "delayMs",
  "concurrency",
  "active",
] as const;

/** One column's name. */
export type SeriesColumn = (typeof SERIES_COLUMNS)[number];

/**
 * `capacity` rows of `SERIES_COLUMNS`, written at the slot the caller names
 * (every scope's ring shares the dashboard's clock ring, so slot `i` of every
 * ring is the same tick). Slots never written hold `NaN`, drawn as gaps.
 */
export class SeriesRing {
  readonly #columns: Float64Array[];

  constructor(readonly capacity: number) {
    this.#columns = SERIES_COLUMNS.map(() => new Float64Array(capacity).fill(NaN));
  }

  /** Forget every value (for reuse by another scope); returns this ring. */
  reset(): this {
    for (const column of this.#columns) column.fill(NaN);
    return this;
  }

  /** Write one tick's values at `slot`. */
  write(slot: number, values: Readonly<Record<SeriesColumn, number>>): void {
    for (let c = 0; c < SERIES_COLUMNS.length; c++) {
      this.#columns[c]![slot] = values[SERIES_COLUMNS[c]!];
    }
  }

  /** The values of `slots` (oldest first) per column, `null` for never written (JSON has no NaN). */
  read(slots: readonly number[]): Record<SeriesColumn, (number | null)[]> {
    const out = {} as Record<SeriesColumn, (number | null)[]>;
    for (let c = 0; c < SERIES_COLUMNS.length; c++) {
      const column = this.#columns[c]!;
      out[SERIES_COLUMNS[c]!] = slots.map((s) => {
        const v = column[s]!;
        return Number.isNaN(v) ? null : v;
      });
    }
    return out;
  }
}
