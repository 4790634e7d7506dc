#include <gtest/gtest.h>
#include "nanovllm/tokenizer/chat_template.h"
TEST(TemplateSmoke, Hello) {
  nanovllm::ChatTemplate t("Hello {{ name }}!");
  nanovllm::ChatTemplateInputs in;
  in.extra["name"] = "world";
  EXPECT_EQ(t.render(in), "Hello world!");
}
