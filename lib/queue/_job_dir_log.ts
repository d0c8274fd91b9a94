/**
 * The name of a job directory's request log (`job_dir.ts`), which the command
 * line also looks for to tell a resumed job from a new one. Private to politely.
 *
 * @module
 */

/** The log's file name inside the job directory. */
export const JOB_DIR_LOG = "requests.log";
