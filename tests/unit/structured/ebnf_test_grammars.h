// The EBNF grammars the EBNF tests run: our own grammars in the GBNF / xgrammar dialect, of the
// kinds users send as `guided_grammar` (JSON, arithmetic, CSV, lists, chess moves, SQL, tool calls,
// config files...) and ones that exercise the dialect's corners (comments, rules over several
// lines, CRLF, lookahead assertions, escapes, bounds, forward and mutual references). All use
// double-quoted literals only and ASCII-only classes outside negations, which the npm xgrammar
// build reads correctly (see regex_xgrammar_compat.h).
#pragma once
#include <string>
#include <vector>

namespace nanovllm::structured::test {

struct EbnfCase {
  std::string name;
  std::string text;
};

inline const std::vector<EbnfCase>& ebnf_cases() {
  static const std::vector<EbnfCase> cases = {
      {"arithmetic", R"g(root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")" | "-" factor
number ::= [0-9]+ ("." [0-9]+)?
)g"},
      {"json", R"g(# JSON values, with optional whitespace after each token
root ::= value
value ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws (pair ("," ws pair)*)? "}" ws
pair ::= string ":" ws value
array ::= "[" ws (value ("," ws value)*)? "]" ws
string ::= "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
  )* "\"" ws
number ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws
ws ::= [ \t\n]*
)g"},
      {"json_array", R"g(root ::= "[" ws (obj ("," ws obj)*)? "]"
obj ::= "{\"id\": " int ", \"tags\": [" (str (", " str)*)? "]}" ws
int ::= "0" | [1-9] [0-9]{0,5}
str ::= "\"" [a-z]{1,8} "\""
ws ::= [ \n]?
)g"},
      {"csv", R"g(root ::= row ("\n" row)* "\n"?
row ::= field ("," field)*
field ::= [^,\n"]* | "\"" ([^"] | "\"\"")* "\""
)g"},
      {"bullet_list", R"g(root ::= item+
item ::= "- " [^\n]+ "\n"
)g"},
      {"numbered_list", R"g(root ::= ([1-9] [0-9]? ". " [a-zA-Z ,]+ "\n"){1,5}
)g"},
      {"yes_no", R"g(root ::= "yes" | "no"
)g"},
      {"chess", R"g(root ::= "1. " move " " move ("\n" [1-9] [0-9]? ". " move " " move)*
move ::= (pawn | piece | castle) [+#]?
pawn ::= ([a-h] "x")? [a-h] [1-8] ("=" [NBRQ])?
piece ::= [NBKQR] [a-h]? [1-8]? "x"? [a-h] [1-8]
castle ::= "O-O" ("-O")?
)g"},
      {"date", R"g(root ::= year "-" month "-" day
year ::= [12] [0-9]{3}
month ::= "0" [1-9] | "1" [0-2]
day ::= "0" [1-9] | [12] [0-9] | "3" [01]
)g"},
      {"email", R"g(root ::= local "@" domain
local ::= [a-zA-Z0-9._%+-]+
domain ::= label ("." label)* "." [a-z]{2,6}
label ::= [a-z0-9] ([a-z0-9-]* [a-z0-9])?
)g"},
      {"ipv4", R"g(root ::= octet "." octet "." octet "." octet
octet ::= "25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9]? [0-9]
)g"},
      {"config", R"g(root ::= (line "\n")*
line ::= comment | pair | ""
comment ::= "#" [^\n]*
pair ::= key ws "=" ws val
key ::= [a-zA-Z_] [a-zA-Z0-9_.]*
val ::= [^\n#]+
ws ::= [ \t]*
)g"},
      {"sexp", R"g(root ::= sexp
sexp ::= atom | "(" (sexp (" " sexp)*)? ")"
atom ::= [a-z0-9]+
)g"},
      {"balanced", R"g(root ::= ("(" root ")")*
)g"},
      {"nested_lists", R"g(root ::= list
list ::= "[" (elem ("," elem)*)? "]"
elem ::= [0-9]+ | list
)g"},
      {"tool_call", R"g(root ::= "<tool_call>" ws "{\"name\": \"" name "\", \"arguments\": " args "}" ws "</tool_call>"
name ::= "get_weather" | "search" | "calculator"
args ::= "{" (kv (", " kv)*)? "}"
kv ::= "\"" [a-z_]+ "\": " (num | str)
num ::= "-"? [0-9]+
str ::= "\"" [^"\\\n]* "\""
ws ::= "\n"?
)g"},
      {"xml", R"g(root ::= element
element ::= "<" tag attr* ">" (text | element)* "</" tag ">"
attr ::= " " [a-z]+ "=\"" [^"<]* "\""
tag ::= [a-z] [a-z0-9]*
text ::= [^<&]+
)g"},
      {"bounds", R"g(root ::= [a-z]{2,4} "-" [0-9]{3} ("x"){0,2} "y"{1,} "z"{0}
)g"},
      {"escapes",
       R"g(root ::= "\t" "\n" "\\" "\"" [\[\]] [\-a] [a\-z] "\u00e9" "\r" [\t\n] "\0"? "\a"? [\.\*\+\(\)\{\}\|\$]
)g"},
      {"comments_multiline", R"g(# a grammar with comments
root ::= # the start
  greeting   # hello
  " "
  name
greeting ::= "hello"
  | "hi"   # alternatives on new lines
name ::= [A-Z] [a-z]*
)g"},
      {"lookahead", R"g(root ::= pair (sep pair)*
pair ::= key ":" val
key ::= [a-z]+ (= ":")
val ::= [0-9]+
sep ::= "," (= [a-z])
)g"},
      {"group_quantifiers", R"g(root ::= ("ab" | "c")+ ("d" | "e"){2} ("f" "g"?)*
)g"},
      {"empty_alternatives", R"g(root ::= "a" ("b" | "") ("" | "c") () "d"
)g"},
      {"class_edges", R"g(root ::= [-a-c] [a-c-] [^-] [\^x] [x^] [\]] [--/]
)g"},
      {"printable", R"g(root ::= [\x20-\x7E]+
)g"},
      {"unicode_literals", R"g(root ::= ("日本" | "中国") "語"+ " " ("é" | "ü")
)g"},
      {"emoji", R"g(root ::= ("😀" | "\U0001F389")+
)g"},
      {"rule_names", R"g(root ::= my-rule.x "," rule_2
my-rule.x ::= rule_2 | "ok"
rule_2 ::= "fine"
)g"},
      {"deep_parens", R"g(root ::= ((((("a" | ("b" ("c")))))))
)g"},
      {"large_repeat", R"g(root ::= "a"{100} [0-9]{0,50}
)g"},
      {"ipv4_bounds", R"g(root ::= [0-9]{1,3} ("." [0-9]{1,3}){3}
)g"},
      {"forward_refs", R"g(root ::= b a b
a ::= c | c a
b ::= "<" c ">"
c ::= [xy]
)g"},
      {"mutual_recursion", R"g(root ::= a
a ::= "x" b | "y"
b ::= "z" a | "w"
)g"},
      {"english", R"g(root ::= sentence+
sentence ::= [A-Z] word (" " word)* [.!?] " "?
word ::= [a-z]+
)g"},
      {"sql", R"g(root ::= "SELECT " cols " FROM " ident (" WHERE " cond)? ";"
cols ::= "*" | ident (", " ident)*
cond ::= ident " " op " " (ident | [0-9]+ | "'" [a-z]* "'")
op ::= "=" | "<" | ">" | "<=" | ">=" | "<>"
ident ::= [a-z_] [a-z0-9_]*
)g"},
      {"markdown_table", R"g(root ::= row sep row+
row ::= "|" (" " cell " |")+ "\n"
sep ::= "|" ("---|")+ "\n"
cell ::= [a-zA-Z0-9]+
)g"},
      {"http_request", R"g(root ::= method " " path " HTTP/1." [01] "\r\n"
method ::= "GET" | "POST" | "PUT" | "DELETE"
path ::= "/" ([a-z0-9_-]+ "/"?)*
)g"},
      {"semver", R"g(root ::= num "." num "." num ("-" pre)? ("+" build)?
num ::= "0" | [1-9] [0-9]*
pre ::= [0-9A-Za-z-]+ ("." [0-9A-Za-z-]+)*
build ::= [0-9A-Za-z-]+
)g"},
      {"uuid", R"g(root ::= h{8} "-" h{4} "-" h{4} "-" h{4} "-" h{12}
h ::= [0-9a-f]
)g"},
      {"phone", R"g(root ::= ("+1 ")? "(" [2-9] [0-9]{2} ") " [0-9]{3} "-" [0-9]{4}
)g"},
      {"hex_color", R"g(root ::= "#" ([0-9a-fA-F]{3} | [0-9a-fA-F]{6})
)g"},
      {"boolean_expr", R"g(root ::= or
or ::= and (" or " and)*
and ::= not (" and " not)*
not ::= "not " not | atom
atom ::= "true" | "false" | "(" or ")"
)g"},
      {"function_call", R"g(root ::= ident "(" (arg (", " arg)*)? ")"
arg ::= ident "=" value | value
value ::= [0-9]+ | "\"" [a-z ]* "\"" | ident
ident ::= [a-zA-Z_] [a-zA-Z0-9_]*
)g"},
      {"yaml_list", R"g(root ::= ("- " key ": " value "\n")+
key ::= [a-z]+
value ::= [a-zA-Z0-9 ]+ | "[" value ("," value)* "]"
)g"},
      {"time", R"g(root ::= ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] (":" [0-5] [0-9])?
)g"},
      {"roman",
       R"g(root ::= "M"{0,3} ("CM" | "CD" | "D"? "C"{0,3}) ("XC" | "XL" | "L"? "X"{0,3}) ("IX" | "IV" | "V"? "I"{0,3})
)g"},
      {"number_bases", R"g(root ::= "0b" [01]+ | "0x" [0-9a-f]+ | "0o" [0-7]+
)g"},
      {"crlf", "root ::= a\r\n  b\r\na ::= \"x\"\r\nb ::= \"y\" | \"z\"\r\n"},
      {"literal_escapes", R"g(root ::= "\x41" "\u0042" "\U00000043" [\x61-\x63] "\x7E"
)g"},
      {"hash_in_strings", R"g(root ::= "#not a comment" [#] "a#b" # a real comment
)g"},
      {"open_bounds", R"g(root ::= "a"{2,} "b"{0,} ("c" | "d"){1,}
)g"},
      {"nested_quantified", R"g(root ::= (("a" | "b")+ ",")* ("c"? "d")+
)g"},
      {"dotted_choices", R"g(root ::= item ("\n" item)*
item ::= ("TODO" | "DONE" | "WAIT") " " [A-Z] [a-z ]* ("." | "!")?
)g"},
  };
  return cases;
}

}  // namespace nanovllm::structured::test
