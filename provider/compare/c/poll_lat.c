/*
 * The C (libibverbs + libmlx5) column of provider/benches/compare.sh for what
 * provider/benches/c/post_cost.c does not measure: the poll of one completion and the
 * self-loop write latency, the same steps as the Rust programs of this crate
 * (src/lib.rs describes them), so the four columns differ only in the verbs stack.
 *
 *   poll_lat poll N   N + 1 signaled 8-byte inline RDMA WRITEs, the last writing MARK;
 *                     wait for MARK in memory, then N calls of poll_one (one ibv_poll_cq
 *                     for one CQE, the function callgrind measures; an empty poll is
 *                     waited out and counted: "poll misses: M")
 *   poll_lat lat N    N times: post one signaled inline WRITE, poll until its CQE; prints
 *                     "lat: t_typical_usec T t_avg_usec A" (median, mean)
 *
 * Build: cc -O2 poll_lat.c -libverbs
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

/* Keep in step with src/lib.rs. */
#define BUF 8192
#define RADDR_OFF 4096
#define MARK_OFF (4096 + 64)
#define FILL 7
#define MARK 0xa5
#define GID_INDEX 1

static struct ibv_qp *qp;
static struct ibv_cq *cq;

static void die(const char *what, int err)
{
	fprintf(stderr, "poll_lat: %s failed: %s\n", what, strerror(err ? err : errno));
	exit(1);
}

__attribute__((noinline)) int poll_one(struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, 1, wc);
}

static void backoff(unsigned *spins)
{
	if (++*spins < 200)
		__builtin_ia32_pause();
	else
		sched_yield();
}

static void wait_one(void)
{
	struct ibv_wc wc;
	unsigned spins = 0;
	int got;
	while ((got = ibv_poll_cq(cq, 1, &wc)) == 0) /* not poll_one: this wait is not measured */
		backoff(&spins);
	if (got < 0 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "poll_lat: completion: %s\n", got < 0 ? "poll error" : ibv_wc_status_str(wc.status));
		exit(1);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + t.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "poll") && strcmp(argv[1], "lat"))) {
		fprintf(stderr, "usage: poll_lat poll|lat N\n");
		return 2;
	}
	int lat = !strcmp(argv[1], "lat");
	unsigned n = strtoul(argv[2], NULL, 0);
	if (!n)
		die("N > 0", EINVAL);

	int num;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list || !num)
		die("ibv_get_device_list", ENODEV);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("ibv_open_device", 0);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd", 0);
	uint8_t *buf;
	if (posix_memalign((void **)&buf, 4096, BUF))
		die("posix_memalign", ENOMEM);
	memset(buf, FILL, BUF);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("ibv_reg_mr", 0);
	cq = ibv_create_cq(ctx, n + 16, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq", 0);
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = n + 2, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 8 },
	};
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("ibv_create_qp", 0);

	union ibv_gid gid;
	int err = ibv_query_gid(ctx, 1, GID_INDEX, &gid);
	if (err)
		die("ibv_query_gid", err);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
		die("modify to INIT", err);
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = GID_INDEX;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
		die("modify to RTR", err);
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)))
		die("modify to RTS", err);

	uint8_t data[8], mark[8];
	memset(data, 0x5a, sizeof data);
	memset(mark, MARK, sizeof mark);
	struct ibv_sge sge = { .addr = (uintptr_t)data, .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)buf + RADDR_OFF, .rkey = mr->rkey },
	}, *bad;
	if (lat) {
		uint64_t *t = calloc(n, sizeof *t), sum = 0;
		for (unsigned i = 0; i < n; i++) {
			uint64_t t0 = now_ns();
			if ((err = ibv_post_send(qp, &wr, &bad)))
				die("ibv_post_send", err);
			wait_one();
			t[i] = now_ns() - t0;
			sum += t[i];
		}
		qsort(t, n, sizeof *t, cmp_u64);
		printf("lat: t_typical_usec %.2f t_avg_usec %.2f iterations %u\n", t[n / 2] / 1e3, (double)sum / n / 1e3, n);
	} else {
		for (unsigned i = 0; i < n; i++) {
			wr.wr_id = i;
			if ((err = ibv_post_send(qp, &wr, &bad)))
				die("ibv_post_send", err);
		}
		wr.wr_id = n;
		sge.addr = (uintptr_t)mark;
		wr.wr.rdma.remote_addr = (uintptr_t)buf + MARK_OFF;
		if ((err = ibv_post_send(qp, &wr, &bad)))
			die("last ibv_post_send", err);
		unsigned spins = 0;
		while (*(volatile uint8_t *)(buf + MARK_OFF) != MARK)
			backoff(&spins);
		/* src/lib.rs's settle(): the CQEs follow the ACKs, after the data. */
		struct timespec ms20 = { 0, 20 * 1000 * 1000 };
		nanosleep(&ms20, NULL);
		struct ibv_wc wc;
		unsigned misses = 0;
		for (unsigned i = 0; i < n; i++) {
			int got;
			spins = 0;
			while ((got = poll_one(&wc)) == 0) {
				misses++;
				backoff(&spins);
			}
			if (got < 0)
				die("ibv_poll_cq", EIO);
			if (wc.status != IBV_WC_SUCCESS || wc.wr_id != i) {
				fprintf(stderr, "poll_lat: poll %u: status %d wr_id %llu\n", i, wc.status, (unsigned long long)wc.wr_id);
				return 1;
			}
		}
		wait_one();
		printf("poll misses: %u\n", misses);
	}
	printf("libmlx5 poll_lat %s x %u: ok\n", argv[1], n);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
