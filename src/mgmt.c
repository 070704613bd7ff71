/* The management HTTP API: the only HTTP in amqplock (mgmt.h). Two GETs,
 * the vhost's queues and exchanges, names and consumer counts only; the
 * user and password go to libcurl as options, never into a URL, so that
 * no message, trace or /proc file can show them.
 *
 * libcurl is loaded (dlopen) on first use, not linked: linked, its 28
 * libraries doubled the start of every run (15 to 29 ms for
 * `amqplock --version` here), which hold and acquire would pay for
 * nothing. */
#include "mgmt.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* RabbitMQ's ports for the API. */
#define HTTP_PORT  15672
#define HTTPS_PORT 15671
/* An answer larger than this is no list of ours: 64 MiB holds the names
 * of about a million queues. */
#define ANSWER_MAX (64u << 20)

/* The libcurl functions used, from the library loaded. */
static struct {
	CURLcode (*global_init)(long flags);
	CURL *(*init)(void);
	CURLcode (*setopt)(CURL *curl, CURLoption option, ...);
	CURLcode (*perform)(CURL *curl);
	CURLcode (*getinfo)(CURL *curl, CURLINFO info, ...);
	char *(*escape)(CURL *curl, const char *text, int len);
	void (*release)(void *p);
	void (*cleanup)(CURL *curl);
	const char *(*strerror_of)(CURLcode code);
} lib;

/* Loads libcurl once (the OpenSSL build, else the GnuTLS one). */
static enum al_status load_libcurl(void)
{
	static const char *const names[] = {"libcurl.so.4", "libcurl-gnutls.so.4"};
	static void *handle;
	size_t i;

	if (lib.init)
		return AL_OK;
	for (i = 0; !handle && i < sizeof(names) / sizeof(names[0]); i++)
		handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!handle)
		return fail(AL_INTERNAL, "the management API needs libcurl (%s): install libcurl4",
			    dlerror());
		/* POSIX: a function pointer from dlsym through a void * is fine. */
#define SYM(field, name) *(void **)&lib.field = dlsym(handle, name)
	SYM(global_init, "curl_global_init");
	SYM(setopt, "curl_easy_setopt");
	SYM(perform, "curl_easy_perform");
	SYM(getinfo, "curl_easy_getinfo");
	SYM(escape, "curl_easy_escape");
	SYM(release, "curl_free");
	SYM(cleanup, "curl_easy_cleanup");
	SYM(strerror_of, "curl_easy_strerror");
	if (lib.global_init && lib.setopt && lib.perform && lib.getinfo && lib.escape &&
	    lib.release && lib.cleanup && lib.strerror_of)
		SYM(init, "curl_easy_init");
#undef SYM
	if (!lib.init || lib.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		lib.init = NULL;
		return fail(AL_INTERNAL, "the libcurl found cannot be used");
	}
	return AL_OK;
}

/* An answer being read. */
struct answer {
	char *text;
	size_t len;
	bool too_large;
};

static size_t keep(char *data, size_t size, size_t n, void *userdata)
{
	struct answer *a = userdata;
	size_t len = size * n;
	char *more;

	if (a->len + len > ANSWER_MAX) {
		a->too_large = true;
		return 0;
	}
	if (!(more = realloc(a->text, a->len + len + 1)))
		return 0;
	a->text = more;
	memcpy(a->text + a->len, data, len);
	a->len += len;
	a->text[a->len] = '\0';
	return len;
}

const char *mgmt_url_problem(const char *url)
{
	const char *host, *c;

	for (c = url; *c; c++)
		if (*c <= ' ' || *c >= 0x7f)
			return "a space or control character";
	if (strncmp(url, "http://", 7) == 0)
		host = url + 7;
	else if (strncmp(url, "https://", 8) == 0)
		host = url + 8;
	else
		return "expected http[s]://host[:port][/path]";
	if (*host == '\0' || *host == '/' || *host == ':')
		return "no host";
	if (memchr(host, '@', strcspn(host, "/")))
		return "a user or password (they come from the broker URL or --password-file)";
	if (strpbrk(url, "?#"))
		return "a query or fragment";
	return NULL;
}

/* The base URL, ending in "/", into buf: management_url, or the broker's
 * host on RabbitMQ's port for the API. */
static void base_url(const struct broker_url *b, const char *management_url, char *buf, size_t size)
{
	const char *host = b->info.host;
	bool v6 = strchr(host, ':') != NULL;

	if (management_url)
		snprintf(buf, size, "%s%s", management_url,
			 management_url[strlen(management_url) - 1] == '/' ? "" : "/");
	else
		snprintf(buf, size, "%s://%s%s%s:%d/", b->info.ssl ? "https" : "http",
			 v6 ? "[" : "", host, v6 ? "]" : "", b->info.ssl ? HTTPS_PORT : HTTP_PORT);
}

static bool tls_failure(CURLcode res)
{
	switch (res) {
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_USE_SSL_FAILED:
		return true;
	default:
		return false;
	}
}

/* What a failed request means, recorded with fail(). */
static enum al_status refused(CURLcode res, long code, const char *base, const char *user,
			      const char *errbuf, const struct answer *a)
{
	const char *why = errbuf[0] ? errbuf : lib.strerror_of(res);

	if (res == CURLE_OK && (code == 401 || code == 403))
		return fail(AL_ACCESS,
			    "the management API at %s refused user \"%s\" (HTTP %ld): a wrong "
			    "password, or the user needs the management or monitoring tag for "
			    "list (rabbitmqctl set_user_tags %s monitoring)",
			    base, user, code, user);
	if (res == CURLE_OK && code == 404)
		return fail(AL_BROKER,
			    "the management API at %s answered 404 Not Found: no such vhost, or "
			    "not the API's address (see --management-url)",
			    base);
	if (res == CURLE_OK)
		return fail(AL_BROKER, "the management API at %s answered HTTP %ld", base, code);
	if (a->too_large)
		return fail(AL_BROKER, "the management API at %s sent more than %u MiB", base,
			    ANSWER_MAX >> 20);
	if (tls_failure(res))
		return fail(AL_CONNECTION,
			    "TLS with the management API at %s failed: %s (see --cacert, --cert, "
			    "--key)",
			    base, why);
	if (res == CURLE_OUT_OF_MEMORY || res == CURLE_WRITE_ERROR)
		return fail(AL_INTERNAL, "out of memory");
	return fail(AL_CONNECTION,
		    "the management API at %s is not reachable (is the rabbitmq_management plugin "
		    "enabled? or give --management-url URL): %s",
		    base, why);
}

/* GETs base + path into *a. */
static enum al_status get(CURL *curl, const struct conn_opts *o, const char *user, const char *base,
			  const char *path, struct deadline by, struct answer *a)
{
	char url[URL_MAX + 512], errbuf[CURL_ERROR_SIZE] = "";
	double left = deadline_left(by), whole = o->connect_timeout + o->rpc_timeout;
	long code = 0;
	CURLcode res;

	if (left <= 0)
		return fail(AL_CONNECTION, "the management API at %s: no time left", base);
	snprintf(url, sizeof(url), "%s%s", base, path);
	*a = (struct answer){0};
	lib.setopt(curl, CURLOPT_URL, url);
	lib.setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	lib.setopt(curl, CURLOPT_WRITEFUNCTION, keep);
	lib.setopt(curl, CURLOPT_WRITEDATA, a);
	lib.setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
		   (long)poll_ms(sooner(o->connect_timeout, left)) + 1);
	lib.setopt(curl, CURLOPT_TIMEOUT_MS, (long)poll_ms(sooner(whole, left)) + 1);
	trace("GET %s", url);
	res = lib.perform(curl);
	lib.getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
	if (res == CURLE_OK && code == 200)
		return AL_OK;
	return refused(res, code, base, user, errbuf, a);
}

/* The options every request of the run shares. */
static void set_options(CURL *curl, const struct conn_opts *o, const struct broker_url *b)
{
	lib.setopt(curl, CURLOPT_NOSIGNAL, 1L);
	/* No http_proxy: the user's password would go to the proxy, and the
	 * AMQP connection to the same broker uses none either. */
	lib.setopt(curl, CURLOPT_NOPROXY, "*");
#if LIBCURL_VERSION_NUM >= 0x075500
	lib.setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
	lib.setopt(curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
	lib.setopt(curl, CURLOPT_USERNAME, b->info.user);
	lib.setopt(curl, CURLOPT_PASSWORD, b->info.password);
	lib.setopt(curl, CURLOPT_USERAGENT, "amqplock/" AMQPLOCK_VERSION);
	if (o->cacert)
		lib.setopt(curl, CURLOPT_CAINFO, o->cacert);
	if (o->cert)
		lib.setopt(curl, CURLOPT_SSLCERT, o->cert);
	if (o->key)
		lib.setopt(curl, CURLOPT_SSLKEY, o->key);
	if (o->insecure) {
		lib.setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
		lib.setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
	}
}

/* What a command asks of the API at base, for b's vhost (escaped): its
 * GETs, and what it makes of them into arg. */
typedef enum al_status api_ask(CURL *curl, const struct conn_opts *o, const struct broker_url *b,
			       const char *base, const char *vhost, struct deadline by, void *arg);

/* `list`: both lists, made into the semaphores under a prefix. */
struct list_ask {
	const char *prefix;
	struct sem_list *l;
};

/* GETs base + first into *a, then base + second into *z. */
static enum al_status get_both(CURL *curl, const struct conn_opts *o, const struct broker_url *b,
			       const char *base, struct deadline by, const char *first,
			       const char *second, struct answer *a, struct answer *z)
{
	enum al_status st = get(curl, o, b->info.user, base, first, by, a);

	return st == AL_OK ? get(curl, o, b->info.user, base, second, by, z) : st;
}

static enum al_status list_at(CURL *curl, const struct conn_opts *o, const struct broker_url *b,
			      const char *base, const char *vhost, struct deadline by, void *arg)
{
	struct list_ask *a = arg;
	struct answer queues = {0}, exchanges = {0};
	char path[2][512];
	enum al_status st;

	snprintf(path[0], sizeof(path[0]), "api/queues/%s?columns=name,consumers,messages_ready",
		 vhost);
	snprintf(path[1], sizeof(path[1]), "api/exchanges/%s?columns=name", vhost);
	st = get_both(curl, o, b, base, by, path[0], path[1], &queues, &exchanges);
	if (st == AL_OK)
		st = list_parse(a->prefix, queues.text ? queues.text : "", exchanges.text, a->l);
	free(queues.text);
	free(exchanges.text);
	return st;
}

/* `status`: the consumers and connections, made into one semaphore's
 * waiters. */
struct waiters_ask {
	const struct sem_name *sn;
	struct list_waiters *w;
};

static enum al_status waiters_at(CURL *curl, const struct conn_opts *o, const struct broker_url *b,
				 const char *base, const char *vhost, struct deadline by, void *arg)
{
	struct waiters_ask *a = arg;
	struct answer consumers = {0}, connections = {0};
	char path[2][512];
	enum al_status st;

	snprintf(path[0], sizeof(path[0]),
		 "api/consumers/%s?columns=queue.name,channel_details.connection_name", vhost);
	snprintf(path[1], sizeof(path[1]),
		 "api/vhosts/%s/connections?columns=name,client_properties,connected_at", vhost);
	st = get_both(curl, o, b, base, by, path[0], path[1], &consumers, &connections);
	if (st == AL_OK)
		st = list_waiters(a->sn, consumers.text ? consumers.text : "",
				  connections.text ? connections.text : "", a->w);
	free(consumers.text);
	free(connections.text);
	return st;
}

/* Asks the API of each broker in order, as connect.c tries them: the
 * next one only while the last could not be reached. */
static enum al_status ask_brokers(const struct conn_opts *o, const char *management_url,
				  struct deadline by, api_ask *ask, void *arg)
{
	char base[URL_MAX + 64], *vhost;
	enum al_status st = AL_CONNECTION;
	unsigned i, tries = management_url ? 1 : o->brokers;
	CURL *curl;

	if (load_libcurl() != AL_OK)
		return AL_INTERNAL;
	if (!(curl = lib.init()))
		return fail(AL_INTERNAL, "out of memory");
	for (i = 0; i < tries && st == AL_CONNECTION; i++) {
		if (i > 0) {
			trace("%s; trying the next broker", status_message());
			status_clear();
		}
		base_url(&o->broker[i], management_url, base, sizeof(base));
		if (!(vhost = lib.escape(curl, o->broker[i].info.vhost, 0))) {
			st = fail(AL_INTERNAL, "out of memory");
			break;
		}
		set_options(curl, o, &o->broker[i]);
		st = ask(curl, o, &o->broker[i], base, vhost, by, arg);
		lib.release(vhost);
	}
	lib.cleanup(curl);
	return st;
}

enum al_status mgmt_list(const struct conn_opts *o, const char *management_url, const char *prefix,
			 struct deadline by, struct sem_list *l)
{
	struct list_ask a = {.prefix = prefix, .l = l};

	*l = (struct sem_list){0};
	return ask_brokers(o, management_url, by, list_at, &a);
}

enum al_status mgmt_waiters(const struct conn_opts *o, const char *management_url,
			    const struct sem_name *sn, struct deadline by, struct list_waiters *w)
{
	struct waiters_ask a = {.sn = sn, .w = w};

	*w = (struct list_waiters){0};
	return ask_brokers(o, management_url, by, waiters_at, &a);
}
