// String formats as grammars (json_schema_formats.h). Every format here is ASCII without `"` or
// `\`, except an email's quoted local part, whose quotes and backslashes are written JSON-escaped.
// Where the reference is not a regular language of modest size, the grammar is a subset (tighter,
// never looser):
//   date-time  a leap second (:60) is refused (the reference allows it on days that had one);
//   hostname   labels of 1 to 63 characters; the 253-character total is not enforced (exact,
//              it multiplies the automaton's states by the label count, and with them the
//              grammar's compile time: an alternative of 4 x 63 and 16 x 15 took 3 s);
//   uri        %-escapes encode ASCII bytes only (%00-%7F): the reference decodes them as UTF-8;
//              no IPvFuture hosts ([v1.x]): the reference throws on them.
#include "nanovllm/structured/json_schema_formats.h"

#include <functional>
#include <string_view>
#include <vector>

namespace nanovllm::structured {

namespace {

class Formats {
 public:
  explicit Formats(Grammar& g) : g_(g) {}

  // A class from "a-zA-Z_" style text (a '-' at either end is literal).
  int32_t cls(std::string_view spec) {
    std::vector<CharRange> r;
    for (size_t i = 0; i < spec.size(); ++i) {
      if (i + 2 < spec.size() && spec[i + 1] == '-') {
        r.push_back({uint32_t(uint8_t(spec[i])), uint32_t(uint8_t(spec[i + 2]))});
        i += 2;
      } else {
        r.push_back({uint32_t(uint8_t(spec[i])), uint32_t(uint8_t(spec[i]))});
      }
    }
    return g_.char_class(r);
  }
  int32_t lit(std::string s) { return g_.literal(std::move(s)); }
  int32_t seq(std::vector<int32_t> v) { return g_.seq(std::move(v)); }
  int32_t alt(std::vector<int32_t> v) { return g_.choice(std::move(v)); }
  int32_t rep(int32_t e, int32_t lo, int32_t hi) { return g_.repeat(e, lo, hi); }
  int32_t opt(int32_t e) { return g_.optional(e); }
  int32_t star(int32_t e) { return g_.star(e); }
  int32_t hex() { return cls("0-9a-fA-F"); }

  // A shared rule "json_fmt_<name>", built once per grammar.
  int32_t rule(const std::string& name, const std::function<int32_t()>& body) {
    std::string full = "json_fmt_" + name;
    int32_t r = g_.rule_named(full);
    if (r < 0) {
      r = g_.add_rule(full);
      g_.define(r, body());
    }
    return g_.ref(r);
  }

  int32_t date() {
    return rule("date", [&] {
      auto d = [&] { return cls("0-9"); };
      // (expressions are never shared between two parents: each use builds its own)
      auto day28 = [&] {
        return alt({seq({lit("0"), cls("1-9")}), seq({lit("1"), d()}), seq({lit("2"), cls("0-8")})});
      };
      int32_t day30 = alt({day28(), lit("29"), lit("30")});
      int32_t day31 = alt({day28(), lit("29"), lit("30"), lit("31")});
      int32_t md = alt(
          {seq({alt({lit("01"), lit("03"), lit("05"), lit("07"), lit("08"), lit("10"), lit("12")}), lit("-"), day31}),
           seq({alt({lit("04"), lit("06"), lit("09"), lit("11")}), lit("-"), day30}), seq({lit("02-"), day28()})});
      // Leap years: divisible by 4, and not by 100 unless by 400 (year 0000 is one).
      auto by4 = [&] { return alt({seq({cls("02468"), cls("048")}), seq({cls("13579"), cls("26")})}); };
      int32_t not00 = alt({seq({lit("0"), cls("48")}), seq({cls("2468"), cls("048")}), seq({cls("13579"), cls("26")})});
      int32_t leap = alt({seq({d(), d(), not00}), seq({by4(), lit("00")})});
      return alt({seq({rep(d(), 4, 4), lit("-"), md}), seq({leap, lit("-02-29")})});
    });
  }

  int32_t time() {
    return rule("time", [&] {
      auto two60 = [&] { return seq({cls("0-5"), cls("0-9")}); };
      auto hour = [&] { return alt({seq({cls("01"), cls("0-9")}), seq({lit("2"), cls("0-3")})}); };
      int32_t frac = opt(seq({lit("."), g_.plus(cls("0-9"))}));
      int32_t offset = alt({cls("zZ"), seq({cls("+-"), hour(), lit(":"), two60()})});
      return seq({hour(), lit(":"), two60(), lit(":"), two60(), frac, offset});
    });
  }

  int32_t date_time() {
    return rule("date_time", [&] { return seq({date(), cls("tT"), time()}); });
  }

  int32_t uuid() {
    return rule("uuid", [&] {
      return seq({rep(hex(), 8, 8), lit("-"), rep(hex(), 4, 4), lit("-"), rep(hex(), 4, 4), lit("-"), rep(hex(), 4, 4),
                  lit("-"), rep(hex(), 12, 12)});
    });
  }

  int32_t ipv4() {
    return rule("ipv4", [&] {
      auto octet = [&] {
        return alt({cls("0-9"), seq({cls("1-9"), cls("0-9")}), seq({lit("1"), cls("0-9"), cls("0-9")}),
                    seq({lit("2"), cls("0-4"), cls("0-9")}), seq({lit("25"), cls("0-5")})});
      };
      return seq({octet(), lit("."), octet(), lit("."), octet(), lit("."), octet()});
    });
  }

  int32_t ipv6() {
    return rule("ipv6", [&] {
      auto h16 = [&] { return rep(hex(), 1, 4); };
      auto h16c = [&](int32_t lo, int32_t hi) { return rep(seq({h16(), lit(":")}), lo, hi); };
      auto ls32 = [&] { return alt({seq({h16(), lit(":"), h16()}), ipv4()}); };
      // "(h16 ':'){0,k} h16" before "::", optional
      auto head = [&](int32_t k) { return opt(seq({h16c(0, k), h16()})); };
      return alt({seq({h16c(6, 6), ls32()}), seq({lit("::"), h16c(5, 5), ls32()}),
                  seq({opt(h16()), lit("::"), h16c(4, 4), ls32()}), seq({head(1), lit("::"), h16c(3, 3), ls32()}),
                  seq({head(2), lit("::"), h16c(2, 2), ls32()}), seq({head(3), lit("::"), h16c(1, 1), ls32()}),
                  seq({head(4), lit("::"), ls32()}), seq({head(5), lit("::"), h16()}), seq({head(6), lit("::")})});
    });
  }

  int32_t hostname() {
    return rule("hostname", [&] {
      auto label = [&](int32_t max) {
        return seq({cls("A-Za-z0-9"), opt(seq({rep(cls("A-Za-z0-9-"), 0, max - 2), cls("A-Za-z0-9")}))});
      };
      return seq({label(63), star(seq({lit("."), label(63)}))});
    });
  }

  int32_t email() {
    return rule("email", [&] {
      auto atext = [&] { return cls("A-Za-z0-9_!#$%&'*+/=?^`{|}~-"); };
      int32_t dot_string = seq({g_.plus(atext()), star(seq({lit("."), g_.plus(atext())}))});
      // Quoted local part: its '"' and '\' appear JSON-escaped (\" and \\).
      std::vector<CharRange> qtext = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x7E}};
      int32_t qchar =
          alt({g_.char_class(qtext), seq({lit("\\\\"), alt({g_.char_class(qtext), lit("\\\""), lit("\\\\")})})});
      int32_t quoted = seq({lit("\\\""), star(qchar), lit("\\\"")});
      auto letdig = [&] { return cls("A-Za-z0-9"); };
      int32_t sub = seq({letdig(), opt(seq({star(cls("A-Za-z0-9-")), letdig()}))});
      int32_t domain =
          seq({sub, star(seq({lit("."), seq({letdig(), opt(seq({star(cls("A-Za-z0-9-")), letdig()}))})}))});
      int32_t literal =
          seq({lit("["), alt({ipv4(), seq({cls("Ii"), cls("Pp"), cls("Vv"), lit("6:"), ipv6()})}), lit("]")});
      return seq({alt({dot_string, quoted}), lit("@"), alt({domain, literal})});
    });
  }

  int32_t uri() {
    return rule("uri", [&] {
      auto unreserved = [&] { return cls("A-Za-z0-9._~-"); };
      auto sub_delims = [&] { return cls("!$&'()*+,;="); };
      // %-escapes of ASCII bytes only: the reference decodes escapes as UTF-8 and refuses invalid sequences
      auto pct = [&] { return seq({lit("%"), cls("0-7"), hex()}); };
      auto pchar = [&] { return alt({unreserved(), pct(), sub_delims(), cls(":@")}); };
      auto segment = [&] { return star(pchar()); };
      auto segment_nz = [&] { return g_.plus(pchar()); };
      auto path_abempty = [&] { return star(seq({lit("/"), segment()})); };
      int32_t scheme = seq({cls("a-zA-Z"), star(cls("a-zA-Z0-9+.-"))});
      int32_t userinfo = star(alt({unreserved(), pct(), sub_delims(), lit(":")}));
      int32_t host = alt({seq({lit("["), ipv6(), lit("]")}), ipv4(), star(alt({unreserved(), pct(), sub_delims()}))});
      int32_t authority = seq({opt(seq({userinfo, lit("@")})), host, opt(seq({lit(":"), star(cls("0-9"))}))});
      int32_t hier =
          alt({seq({lit("//"), authority, path_abempty()}), seq({lit("/"), opt(seq({segment_nz(), path_abempty()}))}),
               seq({segment_nz(), path_abempty()}), g_.empty()});
      auto tail = [&](const char* lead) { return opt(seq({lit(lead), star(alt({pchar(), cls("/?")}))})); };
      return seq({scheme, lit(":"), hier, tail("?"), tail("#")});
    });
  }

 private:
  Grammar& g_;
};

}  // namespace

int32_t add_string_format(Grammar& g, const std::string& format) {
  Formats f(g);
  if (format == "date") return f.date();
  if (format == "time") return f.time();
  if (format == "date-time") return f.date_time();
  if (format == "uuid") return f.uuid();
  if (format == "ipv4") return f.ipv4();
  if (format == "ipv6") return f.ipv6();
  if (format == "hostname") return f.hostname();
  if (format == "email") return f.email();
  if (format == "uri") return f.uri();
  throw GrammarError("JSON schema format '" + format + "' is not supported");
}

}  // namespace nanovllm::structured
