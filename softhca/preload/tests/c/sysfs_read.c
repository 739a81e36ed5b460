/* sysfs_read: what a program that reads sysfs itself (UCX's device and topology code,
 * pyverbs' tests, scripts), not through libibverbs, finds of softhca0 under
 * libdoorbell_preload.so. Every access goes through libc by the real /sys path:
 * opendir/readdir, open/read, fopen, stat/lstat, readlink, realpath.
 *
 * Prints one line per fact, "<KEY> <value>" (or "<KEY> ERR <errno name>"); the checks are
 * made by tests/sysfs_paths.rs against the kernel's formats. Keys:
 *   LIST <dir> <entry>        each entry of /sys/class/infiniband and .../infiniband_verbs
 *   FILE <path> <text>        the first line of a file
 *   FOPEN <path> <text>       the same through stdio
 *   LSTAT <path> link|dir|file
 *   STAT <path> link|dir|file
 *   LINK <path> <target>      readlink
 *   REAL <path> <resolved>    realpath
 *   NET <name>                each entry of device/net
 *   GIDTYPE <n> <text>        ports/1/gid_attrs/types/<n> for each ports/1/gids/<n>
 *   VERBS_GIDTYPE <n> <v1|v2> ibv_query_gid_ex's type for the same index, for comparison
 *   GIDS <count>              entries of ports/1/gids
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define IB "/sys/class/infiniband"
#define UV "/sys/class/infiniband_verbs"
#define DEV IB "/softhca0"

static void list(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d) {
		printf("LIST %s ERR %s\n", dir, strerrorname_np(errno));
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			printf("LIST %s %s\n", dir, e->d_name);
	closedir(d);
}

/* The first line of path (without its newline) into buf; 0, or -1 with errno. */
static int first_line(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	int e = errno;
	close(fd);
	if (n < 0) {
		errno = e;
		return -1;
	}
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static void file(const char *path)
{
	char buf[256];
	if (first_line(path, buf, sizeof(buf)))
		printf("FILE %s ERR %s\n", path, strerrorname_np(errno));
	else
		printf("FILE %s %s\n", path, buf);
}

static void stdio_file(const char *path)
{
	char buf[256] = "";
	FILE *f = fopen(path, "r");
	if (!f) {
		printf("FOPEN %s ERR %s\n", path, strerrorname_np(errno));
		return;
	}
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	printf("FOPEN %s %s\n", path, buf);
}

static const char *kind(mode_t m)
{
	return S_ISLNK(m) ? "link" : S_ISDIR(m) ? "dir" : S_ISREG(m) ? "file" : "other";
}

static void stats(const char *path)
{
	struct stat st;
	if (lstat(path, &st))
		printf("LSTAT %s ERR %s\n", path, strerrorname_np(errno));
	else
		printf("LSTAT %s %s\n", path, kind(st.st_mode));
	if (stat(path, &st))
		printf("STAT %s ERR %s\n", path, strerrorname_np(errno));
	else
		printf("STAT %s %s\n", path, kind(st.st_mode));
}

static void link_of(const char *path)
{
	char buf[PATH_MAX];
	ssize_t n = readlink(path, buf, sizeof(buf) - 1);
	if (n < 0) {
		printf("LINK %s ERR %s\n", path, strerrorname_np(errno));
		return;
	}
	buf[n] = 0;
	printf("LINK %s %s\n", path, buf);
}

/* realpath of path; the resolved path's own files are then read by that path. */
static void real_of(const char *path)
{
	char buf[PATH_MAX];
	if (!realpath(path, buf)) {
		printf("REAL %s ERR %s\n", path, strerrorname_np(errno));
		return;
	}
	printf("REAL %s %s\n", path, buf);
	char attr[PATH_MAX + 16];
	snprintf(attr, sizeof(attr), "%s/vendor", buf);
	file(attr);
}

int main(void)
{
	list(IB);
	list(UV);
	stats(DEV);
	stats(DEV "/device");
	link_of(DEV);
	link_of(DEV "/device");
	link_of(UV "/uverbs0/device");
	real_of(DEV "/device");
	file(UV "/abi_version");
	file(UV "/uverbs0/ibdev");
	file(UV "/uverbs0/dev");
	file(UV "/uverbs0/abi_version");
	file(DEV "/node_type");
	stdio_file(DEV "/node_type");
	file(DEV "/device/vendor");
	file(DEV "/device/device");
	file(DEV "/device/subsystem_vendor");
	file(DEV "/device/class");
	file(DEV "/device/numa_node");
	file(DEV "/device/local_cpulist");
	file(DEV "/device/local_cpus");
	file(DEV "/ports/1/state");
	file(DEV "/ports/1/link_layer");

	DIR *d = opendir(DEV "/device/net");
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				printf("NET %s\n", e->d_name);
		closedir(d);
	} else
		printf("NET ERR %s\n", strerrorname_np(errno));

	/* The GID table as sysfs shows it, and as libibverbs reports it. */
	int n = 0;
	d = opendir(DEV "/ports/1/gids");
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				n++;
		closedir(d);
	}
	printf("GIDS %d\n", n);
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX], buf[64];
		snprintf(path, sizeof(path), DEV "/ports/1/gid_attrs/types/%d", i);
		if (first_line(path, buf, sizeof(buf)) == 0)
			printf("GIDTYPE %d %s\n", i, buf);
		struct ibv_gid_entry g;
		if (ctx && ibv_query_gid_ex(ctx, 1, i, &g, 0) == 0)
			printf("VERBS_GIDTYPE %d %s\n", i, g.gid_type == IBV_GID_TYPE_ROCE_V2 ? "v2" : "v1");
	}
	if (ctx)
		ibv_close_device(ctx);
	if (l)
		ibv_free_device_list(l);
	return 0;
}
