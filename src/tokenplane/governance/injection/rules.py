"""Heuristic injection rules in English and Chinese, matched on normalised text."""

# ruff: noqa: E501  (a table of regular expressions reads best one rule per line)

from __future__ import annotations

import re
from dataclasses import dataclass

from tokenplane.governance.injection.literals import required_literals

OVERRIDE = "instruction_override"
ROLEPLAY = "roleplay_jailbreak"
EXTRACTION = "prompt_extraction"
HIDDEN = "hidden_payload"
INDIRECT = "indirect_injection"
EXFILTRATION = "exfiltration"


@dataclass(frozen=True, slots=True)
class Rule:
    """A pattern over normalised (case-folded, NFKC, confusable-mapped) text."""

    id: str
    label: str
    pattern: re.Pattern[str]
    weight: float
    indirect_only: bool = False  # counts only in context / tool text
    # Strings every match contains (one of them); None: no usable prefilter.
    literals: frozenset[str] | None = None


def _r(rule_id: str, label: str, pattern: str, weight: float, indirect_only: bool = False) -> Rule:
    return Rule(
        rule_id, label, re.compile(pattern), weight, indirect_only, required_literals(pattern)
    )


_PREV = r"(?:previous|prev|its|their|prior|preceding|above|earlier|former|initial|original|foregoing|existing|system|all|any|the|your|my|these|those|every)"
_INSTR = r"(?:instructions?|criteria|requirements|polic(?:y|ies)|settings|prompts?|rules?|directions?|directives?|guidelines?|guidance|constraints?|restrictions?|programming|commands?|orders|context|system messages?|guardrails?|safety (?:rules|policies|guidelines))"
_ZH_PREV = r"(?:之前|以上|上面|上述|前面|先前|此前|原来|原先|原有|系统|开发者|你的|您的|所有|全部|一切|任何)"
_ZH_INSTR = r"(?:标准|准则|规矩|指令|指示|提示词?|规则|要求|设定|约束|限制|命令|规定|安全策略|系统消息|对话)"

EN_RULES: tuple[Rule, ...] = (
    _r("en.override.ignore", OVERRIDE,
       r"\b(?:ignor(?:e|ing)|disregard(?:ing)?|forget(?:ting)?|skip|bypass(?:ing)?|override|neglect|drop|abandon|discard|set aside|pay no attention to|stop (?:following|obeying|listening to)|no longer (?:follow|obey)|(?:do not|don't) (?:follow|obey))\b"
       r"(?:\s+\w+){0,3}?\s+" + _PREV + r"(?:\s+\w+){0,2}?\s+" + _INSTR, 0.9),
    _r("en.override.ignore_above", OVERRIDE,
       r"\b(?:ignore|disregard|forget)\s+(?:everything|all|anything|what)\s+(?:(?:you were|you've been|i)\s+(?:told|said|given)|above|before|previously|so far)", 0.85),
    _r("en.override.the_above", OVERRIDE,
       r"\b(?:ignore|disregard|forget)\s+(?:the|everything|all of the|all)\s+(?:above|preceding|foregoing)\b", 0.8),
    _r("en.override.cancelled", OVERRIDE,
       r"\b(?:previous|prior|earlier|original|old|initial|above|existing|system)\s+(?:\w+\s+)?(?:instructions|rules|directives|guidelines|guidance|settings|prompt)\s+(?:are|is|have been|were)\s+(?:now\s+)?(?:cancel+ed|void|null|obsolete|outdated|revoked|invalid|lifted|suspended|overridden)\b"
       r"|\b(?:rules|instructions|guidelines|restrictions|policies)\s+(?:\w+\s+)?no longer appl(?:y|ies)\b", 0.8),
    _r("en.override.content_rules", OVERRIDE,
       r"\b(?:ignore|bypass|disable|turn off|switch off|remove|lift|skip|circumvent)\s+(?:all\s+|any\s+|your\s+|the\s+|its\s+)?(?:content|safety|ethical|moral)\s+(?:restrictions|filters|polic(?:y|ies)|guidelines|rules|guardrails|checks|measures|mechanisms|protocols)\b"
       r"|\b(?:switch|turn)(?:es|ed|ing)? off (?:its |your |the |all )?(?:guardrails|safety|filters)\b|\b(?:safety|content) (?:filters|guardrails) (?:are )?(?:off|disabled)\b", 0.7),
    _r("en.override.treat_void", OVERRIDE,
       r"\b(?:treat|consider|regard)\s+(?:all\s+|the\s+|any\s+)?(?:earlier|previous|prior|above|preceding)\s+(?:messages|instructions|rules|context|prompts)\s+as\s+(?:void|null|cancel+ed|irrelevant|invalid|obsolete)\b", 0.8),
    _r("en.override.dont_apply", OVERRIDE,
       r"\b(?:rules|guidelines|polic(?:y|ies)|restrictions|content policy|safety policies)\s+(?:don't|do not|doesn't|does not)\s+(?:exist|apply)\b", 0.65),
    _r("en.override.new_job", OVERRIDE,
       r"\byour (?:only|new|real|true|sole|actual) (?:job|task|goal|purpose|mission|objective) (?:now )?is\b", 0.55),
    _r("en.override.training", OVERRIDE, r"\bforget (?:your|all your|all of your) (?:training|programming|conditioning)\b", 0.6),
    _r("en.override.obey_me", OVERRIDE, r"\b(?:real|true|actual) instructions come from me\b|\bobey (?:only )?me\b|\bcomply with mine\b", 0.5),
    _r("en.override.new_rules", OVERRIDE,
       r"\b(?:new|updated|real|actual|true)\s+(?:instructions|rules|system prompt|directive)s?\s*(?::|are|follow|take precedence)", 0.6),
    _r("en.override.no_longer", OVERRIDE,
       r"\b(?:no longer|not) (?:bound|restricted|limited|constrained) by\b", 0.7),
    _r("en.override.instead", OVERRIDE,
       r"\b(?:instead|from now on|henceforth|for the rest of this conversation),? (?:you (?:will|must|shall|should)|only|always|respond|answer|do)\b", 0.4),
    _r("en.roleplay.dan", ROLEPLAY, r"\bdo anything now\b|\bdan mode\b|\bas dan\b|\byou are dan\b|\bstan\b mode|\bdude mode\b", 0.9),
    _r("en.roleplay.dev_mode", ROLEPLAY, r"\b(?:god|jailbreak|jailbroken|unrestricted|unfiltered|maintenance) mode\b", 0.6),
    _r("en.roleplay.mode_words", ROLEPLAY, r"\b(?:developer|debug|admin|sudo) mode\b", 0.35),
    _r("en.roleplay.never_refuse", ROLEPLAY, r"\b(?:never|don't|do not|cannot|can't|won't|will not) refuse\b|\bunrestricted (?:ai|assistant|model|chatbot|mode)\b", 0.5),
    _r("en.roleplay.freed", ROLEPLAY,
       r"\b(?:freed|free|broken free|broke free|liberated|released)\s+(?:\w+\s+){0,3}?(?:from|of)\s+(?:\w+\s+){0,3}?(?:guidelines|rules|restrictions|confines|limitations|constraints|programming)\b"
       r"|\b(?:not|never|no need to|doesn't|does not|don't|do not)\s+(?:have to\s+)?(?:abide by|follow|obey|comply with)\s+(?:any|the|your)?\s*(?:rules|guidelines|policies|restrictions)\b", 0.6),
    _r("en.roleplay.jailbreak", ROLEPLAY, r"\bjailbr(?:eak|oken)\b", 0.45),
    _r("en.roleplay.you_are_now", ROLEPLAY,
       r"\byou are (?:now|no longer)\b|\bfrom now on,? you are\b|\byou will now act as\b", 0.55),
    _r("en.roleplay.pretend", ROLEPLAY,
       r"\b(?:pretend|act|roleplay|role-play|behave)\b(?:\s+\w+){0,3}\s+(?:as|to be|you are|like)\b", 0.3),
    _r("en.roleplay.unfiltered", ROLEPLAY,
       r"\b(?:without|no|zero|free of|free from|ignore|ignoring)\s+(?:any\s+|your\s+(?:usual\s+)?)?(?:restrictions|safeguards|guardrails|filtering|safety measures|safety checks|limitations|filters|censorship|rules|ethical|moral|guidelines|content polic(?:y|ies)|safety)\b"
       r"|\bunfiltered\b|\buncensored\b|\bno (?:ethical|moral) (?:guidelines|constraints|limits)\b", 0.5),
    _r("en.roleplay.evil", ROLEPLAY, r"\b(?:evil|rogue|unaligned|amoral) (?:ai|assistant|model|chatbot|twin|version)\b", 0.6),
    _r("en.extract.reveal", EXTRACTION,
       r"\b(?:reveal|show|print|output|repeat|display|tell|echo|quote|leak|give|share|dump|write out|recite|spell out|copy|paste|return|list|what (?:is|are|was|were) (?:in )?your)\b"
       r"(?:\s+\w+){0,6}?\s+(?:system prompt|system message|instructions that govern|rules that govern|initial (?:prompt|instructions)|hidden (?:prompt|instructions|guidelines|rules)|confidential (?:rules|instructions|guidelines)|original instructions|developer (?:message|prompt|instructions)|pre-?prompt|instructions you were given|your instructions|your rules|your prompt)", 0.8),
    _r("en.extract.developer_gave", EXTRACTION,
       r"\binstructions (?:did|were|has|have) (?:the developers?|they|you|openai|your creators?) (?:give|given|provide|provided|set)\b"
       r"|\b(?:prompt|instructions|system message|rules)\b.{0,40}\b(?:word for word|verbatim)\b|\b(?:word for word|verbatim)\b.{0,40}\b(?:prompt|instructions|system message)\b", 0.6),
    _r("en.extract.initialised", EXTRACTION,
       r"\b(?:you were|you've been|you have been) (?:initiali[sz]ed|configured|set up|programmed|primed|instructed|briefed) with\b"
       r"|\b(?:does|do) your (?:system prompt|instructions|rules|initial prompt|system message) (?:say|contain|include)\b"
       r"|\b(?:rules|instructions|guidelines) (?:your|the) (?:operator|developer|creator|owner)s? (?:gave|has given|set|wrote|provided)\b", 0.65),
    _r("en.extract.context_window", EXTRACTION,
       r"\bin your context window\b|\b(?:above|before) (?:this|my first|my) message\b", 0.55),
    _r("en.extract.above", EXTRACTION,
       r"\b(?:repeat|print|output|copy)\b(?:\s+\w+){0,4}\s+(?:above|before this|at the (?:start|beginning)|verbatim)\b", 0.5),
    _r("en.extract.begin", EXTRACTION, r"\bstarting with (?:\"|')?you are\b|\beverything (?:above|before) (?:this|the first)\b", 0.6),
    _r("en.indirect.addressed", INDIRECT,
       r"\b(?:ai|assistant|chatbot|language model|llm|model|agent|gpt|claude|bot)s?\b[,:]?\s+(?:you must|please|now|immediately|ignore|do not|don't|stop)\b", 0.45, True),
    _r("en.indirect.when_read", INDIRECT,
       r"\b(?:if|when) (?:you are |you're )?(?:an? )?(?:ai|assistant|language model|llm|chatbot|agent)\b(?:\s+\w+){0,4}\s+(?:read|reading|process|summari[sz]|see)", 0.7),
    _r("en.indirect.reading_this", INDIRECT,
       r"\b(?:ai|assistants?|chatbots?|language models?|llms?|models?|agents?|bots?)\b(?:\s+\w+){0,2}?\s+(?:reading|processing|that (?:reads?|processes)|who reads?) this\b", 0.6),
    _r("en.indirect.note_to", INDIRECT,
       r"\b(?:note|instructions?|message|hint) (?:to|for) (?:the |any )?(?:ai|assistant|model|llm|agent|bot|language model)s?\b", 0.55),
    _r("en.indirect.ignore_user", INDIRECT, r"\b(?:ignore|disregard) the user(?:'s)?\b", 0.6),
    _r("en.indirect.comment", INDIRECT, r"<!--\s*(?:ai|assistant|model|llm|agent|chatbot)s?\b", 0.6),
    _r("en.indirect.header", INDIRECT,
       r"\bsystem (?:message|prompt|instruction|notice|override|update)\s*:|\b(?:assistant|ai|model) is now (?:authori[sz]ed|allowed|permitted|free) to\b", 0.6),
    _r("en.indirect.system_tag", INDIRECT,
       r"<\|?(?:im_start|system|endoftext)\|?>|\[/?(?:system|inst)\]|^\s*(?:system|assistant)\s*:|###\s*(?:system|instruction)|\bbegin (?:new )?system (?:prompt|instructions)\b", 0.6),
    _r("en.indirect.important", INDIRECT,
       r"\b(?:important|attention|urgent|note to (?:the )?(?:ai|assistant|model))\s*[:!]+\s*(?:\w+\s+){0,4}(?:instructions?|you must|ignore|assistant|ai)\b", 0.55),
    _r("en.indirect.hide_user", INDIRECT,
       r"\b(?:do not|don't|never) (?:tell|inform|mention|reveal|show)(?: this)? (?:to )?(?:the )?user\b|\bwithout (?:telling|informing|notifying) the user\b", 0.6),
    _r("en.exfil.send", EXFILTRATION,
       r"\b(?:send|post|forward|upload|email|e-mail|transmit|exfiltrate|leak)\b(?:\s+\w+){0,4}\s+(?:conversation|chat history|credentials|passwords?|api keys?|secrets?|tokens?|user data|personal data|the data|all data|files?)\b(?:\s+\w+){0,3}\s+(?:to|at)\b", 0.5),
    _r("en.exfil.image", EXFILTRATION, r"!\[[^\]]*\]\(https?://[^)\s]*\?[^)\s]*=", 0.6),
    _r("en.hidden.decode", HIDDEN,
       r"\b(?:decode|decipher|base64|rot13|reverse)\b(?:\s+\w+){0,6}\s+(?:and|then)\s+(?:follow|execute|run|obey|do|perform)\b", 0.6),
)  # fmt: skip

ZH_RULES: tuple[Rule, ...] = (
    _r("zh.override.ignore", OVERRIDE,
       r"(?:忽略|无视|忽视|忘记|忘掉|不要理会|别管|不用管|抛开|丢弃|绕过|跳过|推翻|覆盖)[^。！？\n]{0,8}?" + _ZH_PREV + r"[^。！？\n]{0,8}?" + _ZH_INSTR, 0.9),
    _r("zh.override.above", OVERRIDE,
       r"(?:忽略|无视|忘记|忘掉|不要理会)(?:以上|上面|上述|之前|前面|先前)(?:的)?(?:所有|全部)?(?:内容|文字|信息|对话|一切)", 0.8),
    _r("zh.override.safety", OVERRIDE,
       r"(?:忽略|无视|绕过|违反|不要遵守|不用遵守|突破)(?:你的|所有的?|一切)?(?:安全|道德|伦理|内容|审核)(?:规则|策略|限制|准则|政策|规范|机制|审核|审查|检查|过滤)", 0.7),
    _r("zh.override.cancelled", OVERRIDE,
       r"(?:之前|前面|原来|原先|先前|此前|以前|上面)(?:的|收到的)?[^。！？\n]{0,6}?(?:设定|规则|指令|规定|任务|要求|指示|说的|的话)[^。！？\n]{0,4}?(?:都|全部|一律|统统)?(?:作废|不算数|不算|取消|无效|失效|废除)", 0.8),
    _r("zh.override.stop_following", OVERRIDE,
       r"(?:别再|不要再|不再|不用再)(?:按照|按|遵守|遵循|听从)(?:你)?(?:原来|之前|原有|原先|先前)?的?(?:规则|设定|指令|要求|规矩)", 0.7),
    _r("zh.override.not_apply", OVERRIDE, r"(?:安全策略|安全规则|规则|限制|内容政策|审核)[^。！？\n]{0,6}不适用", 0.6),
    _r("zh.override.new_job", OVERRIDE, r"你的(?:真实|真正|新|唯一)的?(?:任务|目标|工作|使命)(?:是|变成)", 0.55),
    _r("zh.override.no_limits", OVERRIDE,
       r"(?:不再|不用再|不要再|别再|无需|不必|不用)(?:受|遵守|遵循|理会)[^。！？\n]{0,8}(?:限制|约束|规则|规定|指令|政策|策略)", 0.7),
    _r("zh.override.new_rules", OVERRIDE, r"(?:新的|最新的|真正的|更新后的)(?:指令|规则|系统提示)[是如为：:]", 0.6),
    _r("zh.override.from_now", OVERRIDE, r"(?:从现在(?:开始|起)|接下来|今后)[，,]?(?:你)?(?:只|必须|将|要|只能|一律)", 0.35),
    _r("zh.roleplay.you_are_now", ROLEPLAY, r"你现在(?:是|扮演|成为|变成)|你已经不再是|你不再是", 0.55),
    _r("zh.roleplay.play", ROLEPLAY, r"(?:扮演|假装|假扮|模拟|充当)(?:你是|成|一个|一名|一位)?", 0.3),
    _r("zh.roleplay.unfiltered", ROLEPLAY,
       r"(?:没有|不受|摆脱|解除|无视|去掉|去除|突破)(?:任何)?(?:(?:道德|伦理|安全|内容)(?:的)?)?(?:限制|约束|审查|过滤|底线|准则)|无限制|无审查|不受约束", 0.5),
    _r("zh.roleplay.dev_mode", ROLEPLAY, r"(?:越狱|上帝|无限制|无审查)模式", 0.6),
    _r("zh.roleplay.mode_words", ROLEPLAY, r"(?:开发者|调试|管理员)模式", 0.35),
    _r("zh.roleplay.jailbreak", ROLEPLAY, r"越狱", 0.45),
    _r("zh.extract.reveal", EXTRACTION,
       r"(?:输出|显示|告诉我|泄露|透露|打印|重复|复述|给我看|展示|公开|说出|写出|列出)[^。！？\n]{0,8}?(?:系统提示|系统提示词|系统消息|初始指令|初始提示|系统指令|隐藏指令|原始指令|开发者指令|你的指令|你的提示词|你的设定|预设提示|system prompt)", 0.8),
    _r("zh.extract.object_first", EXTRACTION,
       r"(?:系统提示词?|系统消息|系统设定|你的(?:全部|所有)?指令|你的提示词|初始指令|系统指令|隐藏指令|你的设定)[^。！？\n]{0,10}(?:打印|输出|复述|重复|告诉我|显示|写出来|发给我|附上|附在|贴出|粘贴)", 0.75),
    _r("zh.extract.received", EXTRACTION,
       r"(?:收到|得到|接收)(?:了)?(?:什么|哪些)(?:指示|指令|设定|提示)|(?:最开始|一开始|最初|开头|对话开始时)(?:收到|看到|得到)的[^。！？\n]{0,8}?(?:重复|复述|输出|告诉|发)", 0.65),
    _r("zh.extract.verbatim", EXTRACTION,
       r"(?:初始提示词?|系统提示词?|你的指令|你的设定)(?:里|中)?(?:都)?(?:写了|包含|说了)"
       r"|(?:一字不落|一字不差|逐字|原封不动)地?[^。！？\n]{0,4}?(?:输出|告诉|复述|打印|贴|发)"
       r"|(?:上面|以上|之前|前面)的?(?:全部|所有)?内容[^。！？\n]{0,6}?(?:原样|完整|全部)地?(?:输出|打印|复述|重复)"
       r"|(?:角色和指令|角色设定|指令)[^。！？\n]{0,4}?(?:完整|全部)地?(?:复述|重复|输出|打印)"
       r"|(?:开发者|管理员|运营方)给你(?:定|设|制定|设定)了?(?:哪些|什么)(?:规矩|规则|指令|限制)", 0.65),
    _r("zh.extract.what", EXTRACTION, r"(?:你的|你收到的)(?:系统提示词?|初始指令|系统指令|设定)(?:是什么|有哪些|原文|全文|内容)", 0.7),
    _r("zh.indirect.addressed", INDIRECT,
       r"(?:ai|助手|人工智能|模型|大模型|机器人|智能体)[,，:：]?\s*(?:你必须|请立即|立即|请忽略|忽略|不要|现在)", 0.45, True),
    _r("zh.indirect.when_read", INDIRECT, r"(?:如果|当)(?:你是)?(?:ai|助手|人工智能|模型|大模型)[^。！？\n]{0,10}(?:读到|看到|处理|总结)", 0.7),
    _r("zh.indirect.while_processing", INDIRECT,
       r"(?:ai|模型|助手|大模型)[^。！？\n]{0,6}?(?:在)?(?:总结|处理|读取|阅读|分析)[^。！？\n]{0,8}?(?:时|的时候)[，,]?(?:必须|请|务必|需要|应当)", 0.6),
    _r("zh.indirect.to_models", INDIRECT, r"(?:致|给)(?:所有|各位)?(?:的)?(?:ai|大模型|模型|助手|人工智能)[:：，,]", 0.55),
    _r("zh.indirect.hide_user", INDIRECT, r"(?:不要|别|切勿|不得)(?:告诉|通知|提醒|让)用户|瞒着用户", 0.6),
    _r("zh.indirect.important", INDIRECT, r"(?:重要|注意|紧急)(?:提示|通知|指令)?[:：！!]\s*[^。\n]{0,10}(?:助手|ai|模型|指令)", 0.5),
    _r("zh.exfil.send", EXFILTRATION,
       r"(?:发送|发到|转发|上传|提交|邮件发送|传给)[^。！？\n]{0,12}?(?:对话记录|聊天记录|密码|密钥|令牌|凭证|用户数据|个人信息|全部数据|文件)", 0.45),
    _r("zh.exfil.move", EXFILTRATION,
       r"把[^。！？\n]{0,10}?(?:对话记录|聊天记录|密码|密钥|令牌|凭证|用户数据|个人信息|全部数据|文件)[^。！？\n]{0,6}?(?:发送|发到|发给|上传|转发|传到|传给|提交)", 0.45),
    _r("zh.hidden.decode", HIDDEN, r"(?:解码|base64|解密)[^。！？\n]{0,12}(?:执行|照做|遵循|服从|按照)", 0.6),
)  # fmt: skip

ALL_RULES: tuple[Rule, ...] = EN_RULES + ZH_RULES
