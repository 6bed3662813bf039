/* protocol.h — the messages between kernopt's monitor (monitor.c, trusted, its own process) and the
 * measured program (driver.c + the task's harness + the candidate's kernel).
 *
 * Two named pipes in the run's directory: the monitor writes commands to ko.cmd, rank 0 of the
 * measured program answers on ko.ack. Every message is a fixed-size struct written with one write()
 * (under PIPE_BUF, so atomic). The monitor treats every answer as hostile: it validates each field,
 * and nothing it reports (timestamps, CPU times, input checks, output bytes) comes from the answers
 * except the buffer table, which the host checks against the baseline's.
 */
#ifndef KERNOPT_PROTOCOL_H
#define KERNOPT_PROTOCOL_H
#include <stdint.h>

#define KO_CMD_FIFO "ko.cmd"
#define KO_ACK_FIFO "ko.ack"
#define KO_MAX_RANKS 64
#define KO_NAME_LEN 32
/* The race check's ThreadSanitizer build writes its reports here: a file the monitor opened for it
 * (monitor --report FILE); the filter keeps the kernel from closing or replacing it (seccomp.h). */
#define KO_REPORT_FD 3

enum { KO_OP_SETUP = 1, KO_OP_FILL = 2, KO_OP_GO = 3, KO_OP_POST = 4, KO_OP_QUIT = 5 };
enum { KO_ACK_SETUP = 11, KO_ACK_READY = 12, KO_ACK_DONE = 13, KO_ACK_POSTED = 14 };

typedef struct {
    uint32_t op;
    uint32_t call;   /* the call's index in the plan (FILL/GO/POST) */
    int64_t n;       /* the size (SETUP, FILL) */
    uint64_t seed;   /* FILL only: sent when the call starts, never before */
} ko_cmd;

typedef struct {
    uint64_t addr;   /* rank 0's address of the buffer's data */
    uint64_t count;
    uint32_t dtype, role;
    char name[KO_NAME_LEN];
} ko_buf_desc;

typedef struct {
    uint32_t op;      /* KO_ACK_* */
    uint32_t call;
    int32_t value;    /* SETUP: buffer count; POSTED: bitmask of the inputs another rank changed (bit i: buffer i) */
    int32_t nranks;   /* SETUP: how many ranks (pids) follow */
    ko_buf_desc bufs[16];
    int32_t pids[KO_MAX_RANKS];
} ko_ack;

#endif
