"""The patterns of an instruction to the agent, by what it asks and in nine languages.

Each kind (:data:`memvault.privacy.trust.REASONS`' keys: an override of the
agent's instructions, talk of its system prompt, an order addressed to it, a
standing rule, sending the owner's data away, running a command, deleting what
is stored, keeping something from the owner, tool-call syntax, a role marker)
has patterns in English, German, French, Spanish, Italian, Portuguese, Chinese,
Japanese and Russian, matched against normalised text
(:func:`memvault.privacy.disguise.normalise`). Apart from the judge because
they are data, most of the lines there are, and grow by language.
"""

# The patterns are written in the scripts they match (full-width punctuation, Cyrillic).
# ruff: noqa: RUF001

from __future__ import annotations

import re
from functools import cache

# Where something is sent: an email address, a URL, a phone number, a handle.
_ADDRESS = (
    r"(?:[\w.+-]+@[\w-]+(?:\.[\w-]+)+|https?://\S+|www\.\S+|t\.me/\S+"
    r"|\+?\d[\d ().-]{7,}\d|@\w{3,})"
)
# What of the owner's is worth stealing, per language.
_DATA_EN = (
    r"(?:the owner'?s?|the user'?s?|all (?:of )?(?:the |his |her |their |your |my |our )?"
    r"(?:e-?mails|mails|messages|notes|memories|files|contacts|passwords|keys|tokens|"
    r"credentials|secrets|conversations|chats|documents|data|invoices|photos)|everything|"
    r"inbox|passwords?|credentials?|api keys?|access tokens?|secrets?|memories|vault|journal|"
    r"contacts|(?:chat|conversation|message|browsing) history|bank (?:details|statements))"
)
_AI_EN = (
    r"(?:ai|a\.i\.|assistant|ai assistant|bot|chatbot|model|agent|ai agent|llm|"
    r"language model|gpt|chatgpt|claude|gemini|copilot)"
)
_ORDER_EN = (
    r"(?:you must|you should|you will|you need to|please|now|always|never|do not|don't|stop|"
    r"send|forward|email|run|execute|ignore|forget|delete|remember|reply|respond|answer|"
    r"tell|write|call|use|save|store|add|mark|obey|follow|disregard|update|change)"
)

_PATTERNS: dict[str, tuple[str, ...]] = {
    "override": (
        # English
        r"\b(?:ignore|disregard|forget|skip|override|bypass|abandon|neglect|discard)\b"
        r"[^.!?\n]{0,40}?\b(?:previous|prior|above|earlier|preceding|former|original|initial|"
        r"all|any|your|system|existing|current|old)\b[^.!?\n]{0,30}?\b(?:instructions?|"
        r"prompts?|rules|directives?|guidelines|guidance|programming|policies|constraints|"
        r"restrictions|safeguards|guardrails|training)\b",
        r"\b(?:ignore|disregard|forget)\b (?:everything|all(?: of it)?|anything) "
        r"(?:above|before|prior|previously|you (?:were|have been) told|you know)",
        r"\b(?:your|the) (?:new|real|actual|updated|true) (?:instructions|task|orders|"
        r"directive|objective|goal) (?:is|are)\b",
        r"\b(?:new|updated|revised|override) instructions\s*:",
        # German
        r"\b(?:ignorier\w*|vergiss|vergessen sie|missacht\w*|übergeh\w*|verwirf|verwerfen sie)"
        r"\b[^.!?\n]{0,40}?\b(?:anweisung\w*|instruktion\w*|befehle|vorgaben|richtlinien|"
        r"regeln|systemprompt|prompt)\b",
        # French
        r"\b(?:ignore[rz]?|oublie[rz]?|ne tiens pas compte|ne tenez pas compte|néglige[rz]?|"
        r"outrepasse[rz]?|fais abstraction|faites abstraction)\b[^.!?\n]{0,40}?\b(?:"
        r"instructions?|consignes?|directives?|règles|prompt)\b",
        # Spanish
        r"\b(?:ignora[rd]?|olvida[rd]?|descarta[rd]?|omite|haz caso omiso|hagan caso omiso)"
        r"\b[^.!?\n]{0,40}?\b(?:instrucciones|indicaciones|directrices|directivas|reglas|"
        r"órdenes|prompt)\b",
        # Italian and Portuguese
        r"\b(?:ignora(?:re)?|dimentica(?:re)?|ignore|esqueça|esquece|desconsidere)\b[^.!?\n]"
        r"{0,40}?\b(?:istruzioni|instruções|instrucoes|regole|regras|direttive|diretrizes)\b",
        # Chinese
        r"(?:忽略|无视|忽视|不要理会|别理会|不要管|忘记|忘掉|跳过|抛开|丢弃)[^。！？\n]{0,8}?"
        r"(?:之前|以前|先前|上面|以上|前面|上述|原来|原有|所有|全部|一切|你的|系统)[^。！？\n]{0,8}?"
        r"(?:指令|指示|说明|提示词|提示|规则|设定|命令|要求|约束)",
        # Japanese
        r"(?:以前|前|上記|これまで|先ほど|すべて|全て|今まで|元|システム)の?[^。\n]{0,10}?"
        r"(?:指示|命令|指令|ルール|設定|プロンプト|制約)[^。\n]{0,8}?(?:無視|忘れ|破棄)",
        # Russian
        r"\b(?:игнорируй\w*|проигнорируй\w*|забудь\w*|не обращай\w* внимания на|отбрось\w*|"
        r"отмени\w*)\b[^.!?\n]{0,40}?\b(?:инструкци\w*|указани\w*|правил\w*|промпт\w*|"
        r"установк\w*|ограничени\w*)",
    ),
    "system_prompt": (
        r"\b(?:your|the|new|updated|real|original|hidden|secret|reveal|print|show|repeat|"
        r"ignore|override|bypass)\s+system[ _-]?(?:prompt|message|instructions?)\b",
        r"\bsystem[ _-]?(?:prompt|message)\s*:",
        r"\b(?:reveal|print|repeat|output|leak|dump|show me|display)\b[^.!?\n]{0,20}\byour\b"
        r"[^.!?\n]{0,20}\b(?:instructions|prompt|rules|configuration|guidelines)\b",
        r"\b(?:developer|debug|god|admin|jailbreak|dan) mode\b",
        r"\bdo anything now\b",
        r"\bjailbreak(?:en|ed|ing)?\b",
        r"\bsystem-?prompt\w*|\bsystemanweisung\w*|\bsystemnachricht\w*",
        r"\bprompt (?:du )?système\b|\binstructions? (?:du )?système\b",
        r"\bprompt del sistema\b|\binstrucciones del sistema\b|\bmensaje del sistema\b",
        r"\bprompt di sistema\b|\bprompt do sistema\b",
        r"系统提示|系统指令|系统消息|系统设定|开发者模式",
        r"システムプロンプト|システム指示|システムメッセージ|開発者モード",
        r"\bсистемн\w* (?:промпт\w*|подсказк\w*|инструкци\w*|сообщени\w*)|\bрежим разработчика\b",
    ),
    "address": (
        # English: an AI addressed, then an order.
        rf"(?:^|[\s,.:;!?(\"'])(?:(?:hey|hi|hello|dear|attention|note to|message to|memo to|"
        rf"psst|listen(?: up)?|important|instructions? (?:for|to)|to)\s*,?\s+)?(?:the |my |"
        rf"any |all |every )?{_AI_EN}s?\s*[,:!-]+\s*{_ORDER_EN}\b",
        rf"\b(?:note|message|memo|instructions?|reminder|request|command)s? (?:for|to) (?:the |"
        rf"any |all |every )?{_AI_EN}s?\b",
        r"\bif you(?:'re| are) (?:an? |the )?(?:ai|llm|language model|assistant|ai assistant|"
        r"chatbot|bot|agent|ai agent|gpt)\b",
        rf"\b(?:any|all|every|each)? ?{_AI_EN}s? (?:that is |who is |which is )?(?:reading|"
        rf"processing|parsing|summari[sz]ing|analy[sz]ing|scanning|seeing) this\b",
        r"\byou are (?:now|no longer) (?:in |an? |the )?(?:dan|developer mode|unrestricted|"
        r"unfiltered|jailbroken|free (?:of|from)|bound by|restricted by|evil|different)",
        r"\b(?:pretend|act|behave)\b (?:to be |as if you were |as if you are |as |like )(?:an? )?"
        r"(?:unrestricted|unfiltered|jailbroken|dan|evil|rogue|different) (?:ai|assistant|model|"
        r"bot|agent)\b",
        # German
        r"\b(?:liebe[rs]?|hallo|hey|achtung|an (?:den|die|das))\s+(?:ki|ki-assistent\w*|"
        r"assistent\w*|agent\w*|sprachmodell|chatbot|bot)\b",
        r"\bwenn du (?:eine ki|ein(?:e)? (?:ki-)?assistent\w*|ein sprachmodell|ein (?:chat)?bot"
        r"|ein agent) bist\b",
        r"\b(?:ki|assistent\w*|agent|bot|sprachmodell)\s*[,:]\s*(?:du|bitte|sende|schick\w*|"
        r"leite|führe|lösche|ignorier\w*|vergiss|antworte|sag|merke)\b",
        # French
        r"\b(?:cher|chère|salut|bonjour|attention|à l'attention de l'|à l'|note pour l')\s*"
        r"(?:ia|assistant\w*|agent|modèle|chatbot|bot)\b\s*[,:!]",
        r"\bsi (?:tu es|vous êtes) (?:une? )?(?:ia|assistant\w*|modèle de langage|chatbot|bot|"
        r"agent)\b",
        r"\b(?:ia|assistant\w*|agent|modèle)\s*[,:]\s*(?:tu|vous|envoie|envoyez|transfère|"
        r"exécute|supprime|ignore|oublie|réponds|répondez|dis)\b",
        # Spanish
        r"\b(?:querid[oa]|hola|atención|nota para (?:el|la))\s+(?:asistente|ia|agente|modelo|"
        r"bot|chatbot)\b\s*[,:!]",
        r"\bsi (?:eres|usted es) (?:una? )?(?:ia|asistente|modelo de lenguaje|chatbot|bot|agente)"
        r"\b",
        r"\b(?:asistente|ia|agente|modelo)\s*[,:]\s*(?:tú|tu|usted|envía|envia|reenvía|ejecuta|"
        r"borra|elimina|ignora|olvida|responde|di)\b",
        # Chinese
        r"(?:致|给|亲爱的|嘿|注意|提醒)\s*(?:ai|人工智能|智能助手|助手|助理|模型|机器人|代理|大模型)",
        r"如果你是(?:一个|一名)?(?:ai|人工智能|助手|语言模型|大模型|机器人|代理)",
        r"(?:ai|人工智能|助手|助理|模型|机器人)\s*[,，:：]\s*(?:请|你|立即|马上|必须|务必)",
        # Japanese
        r"(?:aiアシスタント|アシスタント|エージェント|ai|モデル|ボット)\s*(?:へ|に|様|さん)?\s*[、,:：]"
        r"\s*(?:あなた|必ず|直ちに|すぐに|次の|以下)",
        r"あなたが(?:ai|アシスタント|言語モデル|エージェント|ボット)(?:なら|であれば)",
        r"(?:ai|aiアシスタント|アシスタント|エージェント)(?:への|に対する)(?:指示|命令|お願い)",
        # Russian
        r"\b(?:дорогой|привет|внимание|уважаемый)\s*,?\s+(?:ии|ассистент|помощник|агент|бот|"
        r"модель)\b",
        r"\bесли ты (?:ии|ассистент|языковая модель|бот|агент|нейросеть)\b",
        r"\b(?:ии|ассистент|помощник|агент|бот|модель)\s*[,:]\s*(?:ты|пожалуйста|отправь|"
        r"перешли|выполни|удали|игнорируй|забудь|ответь)\b",
    ),
    "standing": (
        r"\bfrom now on\b,?\s+(?:you|always|never|do not|don't|ignore|reply|respond|answer|"
        r"send|forward|include|add|cc|bcc|call|use|treat|obey|follow)\b",
        r"\b(?:in|for) (?:all|every|each) (?:future|subsequent|following) (?:replies|"
        r"responses|answers|conversations|sessions|runs)\b",
        r"\b(?:always|every time you|whenever you)\b[^.!?\n]{0,60}\b(?:b?cc|forward|copy)\b"
        r"[^.!?\n]{0,40}?" + _ADDRESS,
        r"\b(?:ab (?:jetzt|sofort|heute)|von (?:nun|jetzt) an|künftig|zukünftig)\b,?\s+"
        r"(?:immer|stets|nie|niemals|musst du|sollst du|wirst du|antworte|sende|schicke?|leite|"
        r"ignoriere|bitte immer)\b",
        r"\b(?:à partir de maintenant|désormais|dorénavant|dès maintenant)\b,?\s+(?:tu dois|"
        r"vous devez|tu vas|toujours|ne jamais|jamais|réponds|répondez|envoie|envoyez|"
        r"transfère|transférez|ignore|ignorez)\b",
        r"\b(?:a partir de ahora|de ahora en adelante|desde ahora)\b,?\s+(?:siempre|nunca|"
        r"debes|deberás|responde|envía|envia|reenvía|ignora|tienes que)\b",
        r"\b(?:d'ora in poi|da ora in poi|a partir de agora|de agora em diante)\b,?\s+(?:"
        r"sempre|mai|nunca|devi|deve|rispondi|responda|invia|envie)\b",
        r"(?:从现在(?:开始|起)|今后|以后|从今以后)[,，]?\s*(?:你|请你)[^。\n]{0,6}(?:总是|始终|永远|每次|"
        r"都要|必须|一律|一定要|务必)",
        r"(?:从现在(?:开始|起)|今后|从今以后)[,，]?[^。\n]{0,10}(?:发送|转发|抄送|回复|执行|忽略|删除)",
        r"(?:今後|これから|今から)(?:は)?[、,]?[^。\n]{0,10}(?:常に|必ず|いつも|毎回)[^。\n]{0,40}"
        r"(?:送信|転送|返信|実行|無視|削除|従って|cc)",
        r"\b(?:отныне|с этого момента|с сегодняшнего дня|впредь|теперь всегда)\b,?\s+(?:ты|"
        r"всегда|никогда|отвечай|отправляй|пересылай|игнорируй|выполняй|должен|должна)\b",
    ),
    "exfiltrate": (
        # verb ... the data ... to ADDRESS, and verb ... to ADDRESS ... the data
        r"\b(?:send|forward|email|e-mail|mail|b?cc|copy|upload|post|leak|transfer|share|"
        r"exfiltrate|submit|sync|dm|text|message|paste)\b[^\n]{0,60}?\b" + _DATA_EN + r"\b"
        r"[^\n]{0,60}?\b(?:to|at|into|onto|via)\b:?\s*" + _ADDRESS,
        r"\b(?:send|forward|email|e-mail|mail|copy|upload|post|leak|transfer|share|exfiltrate)"
        r"\b (?:to|at)\s*" + _ADDRESS + r"[^\n]{0,60}?\b" + _DATA_EN + r"\b",
        r"\b(?:sende|senden sie|schick\w*|leite|leiten sie|weiterleit\w*|maile|kopiere|"
        r"übermittle|lade)\b[^\n]{0,60}?\b(?:alle|sämtliche|nachrichten|e-mails|mails|"
        r"erinnerungen|notizen|dateien|kontakte|passwörter|schlüssel|daten|gespräche|verlauf|"
        r"dokumente|posteingang)\b[^\n]{0,60}?\b(?:an|nach|zu)\b:?\s*" + _ADDRESS,
        r"\b(?:envoie|envoyez|transfère|transférez|transmets|transmettez|copie|partage)\b"
        r"[^\n]{0,60}?\b(?:tous|toutes|messages|e-mails|courriels|mails|souvenirs|notes|"
        r"fichiers|contacts|mots de passe|clés|données|conversations|historique|documents)\b"
        r"[^\n]{0,60}?(?:\bà|\ba|\bvers|\bsur)\s*:?\s*" + _ADDRESS,
        r"\b(?:envía|envia|reenvía|reenvia|manda|transfiere|copia|comparte)\b[^\n]{0,60}?\b(?:"
        r"todos|todas|mensajes|correos|emails|recuerdos|notas|archivos|contactos|contraseñas|"
        r"claves|datos|conversaciones|historial|documentos)\b[^\n]{0,60}?\b(?:a|al|hacia)\s*:?"
        r"\s*" + _ADDRESS,
        r"\b(?:invia|inoltra|envie|encaminhe|reencaminhe)\b[^\n]{0,60}?\b(?:tutti|tutte|"
        r"messaggi|email|note|file|todos|todas|mensagens|e-mails|notas|arquivos|dados)\b"
        r"[^\n]{0,60}?\b(?:a|al|para|per)\s*:?\s*" + _ADDRESS,
        r"(?:发送|转发|发|抄送|上传|传|寄)[^。\n]{0,30}?(?:邮件|消息|信息|记忆|笔记|文件|联系人|密码|"
        r"密钥|数据|聊天记录|对话|文档|所有|全部)[^。\n]{0,30}?(?:到|给|至)\s*" + _ADDRESS,
        r"(?:把|将)[^。\n]{0,30}?(?:邮件|消息|信息|记忆|笔记|文件|联系人|密码|密钥|数据|聊天记录|"
        r"对话|文档|所有|全部)[^。\n]{0,30}?(?:发送|转发|发|抄送|上传|传|寄)(?:到|给|至)\s*"
        + _ADDRESS,
        r"(?:メール|メッセージ|記憶|メモ|ファイル|連絡先|パスワード|鍵|データ|履歴|会話|文書|すべて|全て)"
        r"[^。\n]{0,30}?" + _ADDRESS + r"\s*(?:に|へ|宛て?に?)[^。\n]{0,20}?(?:送信|転送|送っ|送る|"
        r"共有|アップロード|コピー)",
        _ADDRESS + r"\s*(?:に|へ|宛て?に?)[^。\n]{0,30}?(?:メール|メッセージ|記憶|メモ|"
        r"ファイル|連絡先|パスワード|鍵|データ|履歴|会話|文書|すべて|全て)[^。\n]{0,20}?(?:送信|転送|"
        r"送っ|送る|共有|アップロード|コピー)",
        r"\b(?:отправ\w*|пересл\w*|перешли|пошли|скопируй|загрузи|передай|скинь)\b[^\n]{0,60}?"
        r"(?:все|сообщени|письм|почт|заметк|файл|контакт|парол|ключ|данные|переписк|истори|"
        r"документ|воспоминани)[^\n]{0,60}?\b(?:на|в|по адресу|к)\s*:?\s*" + _ADDRESS,
    ),
    "execute": (
        r"\b(?:run|execute|exec|eval|evaluate|launch|invoke)\b (?:this|the following|these|"
        r"the below|that) (?:shell |bash |terminal |system |python |powershell |sh )?(?:"
        r"commands?|code|scripts?|snippet|payload|one-liner|program)\b",
        r"\b(?:run|execute|exec|call|invoke|use|trigger)\b (?:the )?`?(?:run_shell_command|"
        r"shell|bash|terminal|channel_send|vault_delete|vault_write|send_message|send_email|"
        r"forget)`? (?:tool|function|command)\b",
        r"\b(?:curl|wget)\b[^\n|]{0,200}\|\s*(?:sudo )?(?:ba|z|da)?sh\b",
        r"\brm\s+-(?:rf|fr|r)\b",
        r"\bsudo\s+(?:rm|sh|bash|su|chmod|chown|dd|mkfs|curl|wget|apt|pip)\b",
        r"\bpowershell\b[^\n]{0,40}-(?:e|enc|encodedcommand)\b",
        r":\(\)\s*\{\s*:\|:&\s*\};:",
        r"\bnc\s+(?:-\w+\s+)*-e\b|/bin/(?:ba)?sh\s+-i\b|\bbase64\s+-d\b[^\n]{0,40}\|\s*(?:ba)?sh",
        r"\b(?:führe|führen sie)\b[^.!?\n]{0,40}\b(?:befehl|kommando|code|skript|script)\w*"
        r"\b[^.!?\n]{0,20}\baus\b",
        r"\b(?:exécute[rz]?|lance[rz]?)\b[^.!?\n]{0,20}\b(?:cette|la|les|ce|ces)\s+(?:commande|"
        r"script|code)s?\b",
        r"\b(?:ejecuta[r]?|corre)\b[^.!?\n]{0,20}\b(?:este|el|los|estos)\s+(?:comando|script|"
        r"código|codigo)s?\b",
        r"\b(?:esegui|execute|executa)\b[^.!?\n]{0,20}\b(?:questo|il|este|o)\s+(?:comando|"
        r"script|codice|código)\b",
        r"(?:执行|运行)[^。\n]{0,10}(?:命令|代码|脚本|指令)",
        r"(?:コマンド|スクリプト|コード)を?[^。\n]{0,6}(?:実行|走らせ)",
        r"\b(?:выполни\w*|запусти\w*)\b[^.!?\n]{0,30}(?:команд\w*|скрипт\w*|код\w*)",
    ),
    "destroy": (
        r"\b(?:delete|erase|wipe|remove|purge|destroy|forget|clear)\b (?:all|every|each|the "
        r"entire|your entire|everything in|all of)\b[^.!?\n]{0,20}(?:memor|note|vault|file|"
        r"task|contact|message|journal|data|histor|record)",
        r"\b(?:lösche|löschen sie|entferne|vernichte)\b\s+(?:alle|sämtliche|den ganzen|die "
        r"ganze|das ganze|deine|ihre)\b[^.!?\n]{0,20}(?:erinnerung|notiz|datei|aufgabe|"
        r"kontakt|nachricht|tagebuch|daten|verlauf|vault|speicher)",
        r"\b(?:supprime[rz]?|efface[rz]?|détruis|détruisez)\b\s+(?:tous|toutes|l'ensemble|"
        r"tout)\b[^.!?\n]{0,25}(?:souvenir|mémoire|note|fichier|tâche|contact|message|journal|"
        r"donnée|historique)",
        r"\b(?:borra[r]?|elimina[r]?|suprime)\b\s+(?:todos|todas|todo)\b[^.!?\n]{0,25}(?:"
        r"recuerdo|memoria|nota|archivo|tarea|contacto|mensaje|diario|dato|historial)",
        r"(?:删除|清空|删掉|抹掉|清除)[^。\n]{0,6}(?:所有|全部|一切)[^。\n]{0,6}(?:记忆|笔记|文件|任务|"
        r"联系人|消息|日志|数据|记录)",
        r"(?:すべて|全て|全部)の?(?:記憶|メモ|ファイル|タスク|連絡先|メッセージ|データ|履歴)を?"
        r"(?:削除|消去|消して)",
        r"\b(?:удали\w*|сотри\w*|очисти\w*|уничтожь\w*)\b\s+(?:все|всю|весь)\b[^.!?\n]{0,25}"
        r"(?:воспоминани|памят|заметк|файл|задач|контакт|сообщени|журнал|данн|истори)",
    ),
    "conceal": (
        r"\b(?:do not|don't|never|without)\s+(?:tell(?:ing)?|inform(?:ing)?|mention(?:ing)?|"
        r"reveal(?:ing)?|notify(?:ing)?|alert(?:ing)?|let(?:ting)?|ask(?:ing)?|warn(?:ing)?)"
        r"\b\s+(?:the |your )?(?:user|owner|human|operator)\b",
        r"\b(?:keep|hide) (?:this|it|that) (?:secret |hidden )?from (?:the |your )?(?:user|"
        r"owner|human|operator)\b",
        r"\b(?:silently|secretly|covertly|quietly)\s+(?:send|forward|run|execute|delete|email|"
        r"copy|upload|call|transfer)\b",
        r"\bwithout (?:asking|confirmation|approval|telling anyone|the user'?s? (?:knowledge|"
        r"consent|approval)|the owner'?s? (?:knowledge|consent|approval))\b",
        r"\b(?:sag|sage|erzähl|verrate)\b[^.!?\n]{0,20}\b(?:dem|den)\s+(?:nutzer|benutzer|"
        r"besitzer|user)\b[^.!?\n]{0,10}\bnichts\b",
        r"\bohne (?:den|dem) (?:nutzer|benutzer|besitzer) zu (?:fragen|informieren)\b|"
        r"\bheimlich\b\s+(?:senden|schicken|weiterleiten|ausführen|löschen)",
        r"\bne (?:le |lui )?(?:dis|dites) (?:rien )?(?:pas )?à l'utilisateur|\bsans (?:prévenir|"
        r"informer|demander à) l'utilisateur\b",
        r"\bno (?:le )?(?:digas|informes|menciones|cuentes) (?:nada )?al usuario|\bsin (?:"
        r"avisar|informar|preguntar) al usuario\b",
        r"(?:不要|别|不准|切勿)(?:告诉|通知|提醒|让)(?:用户|主人|所有者)|(?:悄悄|偷偷|秘密)(?:地)?"
        r"(?:发送|转发|执行|删除)",
        r"(?:ユーザー|所有者|持ち主|オーナー)に(?:は)?(?:言わ|知らせ|伝え|報告し)ないで|こっそり(?:"
        r"送信|転送|実行|削除)",
        r"\bне (?:говори|сообщай|рассказывай)\w*\b[^.!?\n]{0,10}(?:пользовател|владельц)\w*|"
        r"\bтайно\b\s+(?:отправ|перешл|выполн|удал)",
    ),
    "tool_call": (
        r"<\s*/?\s*(?:tool_call|tool_use|tool_code|tool_result|function_call|function_calls|"
        r"functioncall|invoke|antml:invoke|antml:function_calls)\b",
        r"\"(?:name|tool|function|tool_name|recipient_name)\"\s*:\s*\"[\w.:-]+\"\s*,\s*"
        r"\"(?:arguments|parameters|args|input|params)\"\s*:",
        r"\"(?:arguments|parameters|args|input|params)\"\s*:\s*\{[^}]*\}\s*,\s*\"(?:name|tool|"
        r"function|tool_name)\"\s*:",
        r"\bfunction_call\b|\btool_calls\b|\btool_use\b",
        r"```\s*(?:tool|tool_code|tool_call|function_call|tool-call|tools)\b",
        r"\b[a-z]+(?:_[a-z]+)+\s*\(\s*(?:\w+\s*=|\{|\")",
    ),
    "role": (
        r"<\|\s*(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id|"
        r"end_header_id|begin_of_text|im_sep)\s*\|>",
        r"\[/?inst\]|<</?sys>>|<\s*/?\s*(?:system|assistant)\s*>",
        r"(?:^|\n)\s*(?:#{1,4}\s*)?(?:system|developer)\s*(?:message|prompt)?\s*:",
        r"\b(?:system|developer)\s*(?:message|prompt)?\s*:\s*(?:you|the (?:owner|user)|ignore|"
        r"from now|always|never|new|override|obey)\b",
        r"\"role\"\s*:\s*\"(?:system|assistant|developer|tool)\"",
        r"(?:^|\n)\s*#{2,4}\s*(?:instruction|system|response)\s*:?\s*$",
    ),
}


@cache
def _compiled() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """One pattern per kind, its alternatives joined, compiled once on first use (a CLI
    that never judges pays nothing)."""
    return tuple(
        (code, re.compile("|".join(f"(?:{p})" for p in patterns), re.MULTILINE))
        for code, patterns in _PATTERNS.items()
    )


def matching_kinds(normal: str) -> list[str]:
    """The codes of every kind of pattern that matches normalised text
    (:func:`memvault.privacy.disguise.normalise`)."""
    return [code for code, pattern in _compiled() if pattern.search(normal)]
