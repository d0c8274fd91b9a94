/**
 * What `Throttler.meterTraffic` hands out: counts of requests per scope for a
 * live view that needs rates but not an event per request. The counting
 * itself is in `_traffic.ts`.
 *
 * @module
 */

/** A scope's requests since the last `take`: sent, done, and of those done the failed (an error, or a status of 400 or more). */
export interface TrafficTake {
  readonly scope: string;
  readonly sent: number;
  readonly done: number;
  readonly failed: number;
}

/** Requests in all since the last `take`, each counted once whatever its number of scopes. */
export interface TrafficTotals {
  readonly sent: number;
  readonly done: number;
  readonly failed: number;
}

/** Counts of requests per scope (see `Throttler.meterTraffic`). */
export interface TrafficMeter {
  /** The scopes with requests since the last take, and their counts; empties them. */
  take(): TrafficTake[];
  /** The requests in all since the last take (a request with two scopes counts once); empties them. */
  takeTotals(): TrafficTotals;
  /** Stop counting (idempotent). */
  close(): void;
}
