/* Whole numbers, durations and message quoting. */
#include "parse.h"
#include "tap.h"

static void whole_numbers(void)
{
	static const char *const bad[] = {"",
					  "-1",
					  "+1",
					  " 1",
					  "1 ",
					  "1.5",
					  "0x10",
					  "1e3",
					  "abc",
					  "5s",
					  "99999999999999999999999"};
	unsigned long v = 0;
	size_t i;

	ok(parse_uint("0", 0, 10, &v) == NULL && v == 0, "0 in [0, 10]");
	ok(parse_uint("10", 0, 10, &v) == NULL && v == 10, "10 in [0, 10]");
	ok(parse_uint("007", 0, 10, &v) == NULL && v == 7, "leading zeros are decimal");
	ok(parse_uint("11", 0, 10, &v) != NULL, "11 is above [0, 10]");
	ok(parse_uint("0", 1, 10, &v) != NULL, "0 is below [1, 10]");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(parse_uint(bad[i], 0, 1000000, &v) != NULL, "\"%s\" is not a whole number",
		   bad[i]);
}

static void durations(void)
{
	static const char *const bad[] = {"",    "-1", "1.2.3", ".",  "1e3", "inf", "nan",
					  "0x1", " 1", "1,5",   "s",  "m",   "1x",  "1mm",
					  "1 m", "1M", "1ms",   "h1", ".s",  "1sm"};
	double v = -1;
	size_t i;

	ok(parse_seconds("0", 10, &v) == NULL && v == 0, "0 seconds");
	ok(parse_seconds("2.5", 10, &v) == NULL && v == 2.5, "2.5 seconds");
	ok(parse_seconds(".25", 10, &v) == NULL && v == 0.25, ".25 seconds");
	ok(parse_seconds("3.", 10, &v) == NULL && v == 3, "3. seconds");
	ok(parse_seconds("10.5", 10, &v) != NULL, "above the maximum");
	ok(parse_seconds("90s", 100, &v) == NULL && v == 90, "90s");
	ok(parse_seconds("1.5m", 100, &v) == NULL && v == 90, "1.5m");
	ok(parse_seconds("2h", 7200, &v) == NULL && v == 7200, "2h");
	ok(parse_seconds(".5m", 100, &v) == NULL && v == 30, ".5m");
	ok(parse_seconds("2h", 7199, &v) != NULL, "2h above the maximum");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(parse_seconds(bad[i], 100, &v) != NULL, "\"%s\" is not a duration", bad[i]);
}

static void quoting(void)
{
	char buf[32];

	is_str(parse_quote_arg("jobs", buf, sizeof(buf)), "\"jobs\"", "plain text is quoted");
	is_str(parse_quote_arg("a\"b\\c", buf, sizeof(buf)), "\"a\\x22b\\x5cc\"",
	       "quote and backslash are escaped");
	is_str(parse_quote_arg("\n\xff", buf, sizeof(buf)), "\"\\x0a\\xff\"",
	       "control and non-ASCII bytes are escaped");
	is_str(parse_quote_arg("0123456789012345678901234567890123456789", buf, 16),
	       "\"012345...\"", "long text is cut short");
	ok(strlen(parse_quote_arg("\x01\x01\x01\x01\x01\x01\x01\x01", buf, 16)) < 16,
	   "escapes never overflow");
}

static void versions(void)
{
	static const char *const bad[] = {"",      "4",    "4.2",      "4.2.",     ".2.6",
					  "a.b.c", "4..6", "4.1000.0", "4.2.1000", "99999999.0.0"};
	unsigned long v = 0;
	size_t i;

	ok(parse_version("3.10.8", 6, &v) == NULL && v == 3010008, "3.10.8");
	ok(parse_version("4.2.6+1.g2f3c", 13, &v) == NULL && v == 4002006, "a suffix is ignored");
	ok(parse_version("4.3.6-1", 7, &v) == NULL && v == 4003006, "a Debian revision is ignored");
	ok(parse_version("4.2.6", 3, &v) != NULL, "only len bytes are read");
	ok(parse_version("4.2.5", 5, &v) == NULL && v < 4002006 &&
		   parse_version("4.10.0", 6, &v) == NULL && v > 4002006,
	   "the number compares as versions do");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(parse_version(bad[i], strlen(bad[i]), &v) != NULL, "\"%s\" is not a version",
		   bad[i]);
}

static void labels(void)
{
	char long_label[PARSE_LABEL_MAX + 2];

	is_str(parse_label("nightly db backup"), NULL, "a label of printable ASCII");
	is_str(parse_label("a:b/c (d) #1"), NULL, "punctuation is printable");
	ok(parse_label("") != NULL, "an empty label is refused");
	ok(parse_label("a\tb") != NULL, "a tab is refused");
	ok(parse_label("a\nb") != NULL, "a newline is refused");
	ok(parse_label("caf\xc3\xa9") != NULL, "bytes outside ASCII are refused");
	ok(parse_label("a\x7f") != NULL, "DEL is refused");
	memset(long_label, 'x', sizeof(long_label) - 1);
	long_label[PARSE_LABEL_MAX] = '\0';
	is_str(parse_label(long_label), NULL, "64 bytes are allowed");
	long_label[PARSE_LABEL_MAX] = 'x';
	long_label[PARSE_LABEL_MAX + 1] = '\0';
	ok(parse_label(long_label) != NULL, "65 bytes are refused");
}

int main(void)
{
	whole_numbers();
	durations();
	quoting();
	versions();
	labels();
	return done_testing();
}
