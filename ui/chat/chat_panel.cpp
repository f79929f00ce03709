#include "chat_panel.h"

#include <algorithm>
#include <utility>

#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QShortcut>
#include <QSpinBox>
#include <QToolButton>
#include <QVBoxLayout>

#include "prompt_view.h"
#include "session/session_model.h"

namespace gbui {

ChatPanel::ChatPanel(SessionModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(buildToolBar());
  layout->addLayout(buildNavigator());
  buildMessageArea(layout);
  setObjectNames();
  connectControls();
  updateButtons();
}

// The row above the conversation: mode, format, colouring, token budget.
QHBoxLayout* ChatPanel::buildToolBar() {
  auto* bar = new QHBoxLayout;
  mode_ = new QComboBox;
  mode_->addItems({tr("Chat"), tr("Completion")});
  format_ = new QComboBox;
  format_->addItems({"model", "chatml", "llama2", "llama3", "plain"});
  format_->setToolTip(tr("Prompt format: the model's own chat template, or a built-in format"));
  color_ = new QComboBox;
  color_->addItems({tr("Probability"), tr("Entropy"), tr("Rank")});
  color_->setToolTip(tr("Colour tokens by (green: likely, red: unlikely). Tokens the format forced (its grammar "
                        "allowed only that token) are blue in every mode."));
  forcedLegend_ = new QLabel(tr("forced"));
  forcedLegend_->setObjectName(QStringLiteral("forcedLegend"));
  forcedLegend_->setStyleSheet(QStringLiteral("background: %1; padding: 0 4px;").arg(TokenView::forcedColor().name()));
  forcedLegend_->setToolTip(tr("Blue tokens were forced by the request's format: the grammar allowed only that "
                               "token, so its probability says nothing about the model"));
  forcedLegend_->setVisible(false);  // until the chat shows a forced token
  maxTokens_ = new QSpinBox;
  maxTokens_->setRange(1, 32768);
  maxTokens_->setValue(256);
  maxTokens_->setPrefix(tr("max "));
  bar->addWidget(mode_);
  bar->addWidget(format_);
  bar->addWidget(new QLabel(tr("Colour:")));
  bar->addWidget(color_);
  bar->addWidget(forcedLegend_);
  bar->addWidget(maxTokens_);
  bar->addStretch();
  return bar;
}

// The answer navigator (< 2/3 · seed S > Copy seed) on a row of its own, with
// its room from the start, shown or not: nothing in the window moves when the
// first answer arrives, and it does not widen the chat (a wider chat would
// squeeze the docks beside it).
QHBoxLayout* ChatPanel::buildNavigator() {
  auto* bar = new QHBoxLayout;
  bar->addStretch();
  prevBranch_ = new QPushButton(QStringLiteral("<"));
  nextBranch_ = new QPushButton(QStringLiteral(">"));
  prevBranch_->setFixedWidth(28);
  nextBranch_->setFixedWidth(28);
  prevBranch_->setToolTip(tr("Previous answer (branch)"));
  nextBranch_->setToolTip(tr("Next answer (branch)"));
  branchLabel_ = new QLabel;
  branchLabel_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  copySeed_ = new QToolButton;
  copySeed_->setText(tr("Copy seed"));
  copySeed_->setToolTip(tr("Copy this answer's seed (pin it in the Sampling panel to reproduce the answer)"));
  bar->addWidget(prevBranch_);
  bar->addWidget(branchLabel_);
  bar->addWidget(nextBranch_);
  bar->addWidget(copySeed_);
  branchLabel_->setFixedWidth(branchLabel_->fontMetrics().horizontalAdvance(QStringLiteral("888/888 \u00b7 seed 2147483647")) + 8);
  for (QWidget* w : std::initializer_list<QWidget*>{prevBranch_, branchLabel_, nextBranch_, copySeed_}) {
    QSizePolicy policy = w->sizePolicy();
    policy.setRetainSizeWhenHidden(true);
    w->setSizePolicy(policy);
  }
  return bar;
}

// Under the tool bar: the template warning, the system prompt, the token view,
// the input and the status line above the buttons.
void ChatPanel::buildMessageArea(QVBoxLayout* layout) {
  warning_ = new QLabel;
  warning_->setWordWrap(true);
  warning_->setStyleSheet(QStringLiteral("color: #b35c00;"));
  warning_->setVisible(false);
  layout->addWidget(warning_);
  system_ = new QLineEdit;
  system_->setPlaceholderText(tr("System prompt (chat mode)"));
  layout->addWidget(system_);
  view_ = new TokenView;
  // Every token the chat shows is a record of the model (the view keeps keys only).
  view_->setTokenLookup([model = model_](RequestKey request, int index) { return model->token(request, index); });
  layout->addWidget(view_, 1);
  input_ = new QPlainTextEdit;
  input_->setPlaceholderText(tr("Type a message, Ctrl+Enter to send"));
  input_->setMaximumHeight(90);
  layout->addWidget(input_);
  auto* buttons = new QHBoxLayout;
  status_ = new QLabel;
  send_ = new QPushButton(tr("Send"));
  stop_ = new QPushButton(tr("Stop"));
  regenerate_ = new QPushButton(tr("Regenerate"));
  edit_ = new QPushButton(tr("Edit"));
  edit_->setToolTip(tr("Edit the last message (double-click an earlier message or the system prompt to edit it); "
                       "sending it starts a new branch, the old conversation stays in the Branches panel"));
  cancelEdit_ = new QPushButton(tr("Cancel edit"));
  cancelEdit_->setObjectName(QStringLiteral("cancelEdit"));
  cancelEdit_->setVisible(false);
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  showPrompt_ = new QPushButton(tr("Show prompt"));
  showPrompt_->setToolTip(tr("The exact prompt text and tokens the engine rendered for the last answer"));
  showReasoning_ = new QCheckBox(tr("Show reasoning"));
  showReasoning_->setToolTip(tr("Unfold <think> blocks (shown grey; never sent back as history)"));
  // The status (statistics, edit hints, errors) gets the panel's full width on
  // its own line; beside the buttons it was squeezed into a word-per-line column.
  layout->addWidget(status_);
  buttons->addStretch(1);
  buttons->addWidget(showReasoning_);
  buttons->addWidget(showPrompt_);
  for (QPushButton* b : {cancelEdit_, edit_, regenerate_, stop_, send_}) buttons->addWidget(b);
  layout->addLayout(buttons);
  regenerate_->setToolTip(tr("Answer again with a new seed (unless the seed is pinned)"));
}

// Object names: what tests and --panel screenshots find the widgets by.
void ChatPanel::setObjectNames() {
  const std::initializer_list<std::pair<QWidget*, const char*>> names = {
      {mode_, "chatMode"},       {format_, "chatFormat"},   {color_, "colourMode"},  {maxTokens_, "maxTokens"},
      {prevBranch_, "prevBranch"}, {nextBranch_, "nextBranch"}, {branchLabel_, "branchLabel"},
      {copySeed_, "copySeed"},   {system_, "systemPrompt"}, {view_, "tokenView"},    {input_, "chatInput"},
      {status_, "chatStatus"},   {send_, "send"},           {stop_, "stop"},         {regenerate_, "regenerate"},
      {edit_, "editLast"}};
  for (const auto& [widget, name] : names) widget->setObjectName(QLatin1String(name));
  showPrompt_->setObjectName(QStringLiteral("showPrompt"));
  showReasoning_->setObjectName(QStringLiteral("showReasoning"));
  warning_->setObjectName(QStringLiteral("chatTemplateWarning"));
}

// Buttons, shortcuts (Ctrl+Enter sends, Escape stops) and the session model.
void ChatPanel::connectControls() {
  connect(copySeed_, &QToolButton::clicked, this, [this] {
    if (const qint64 seed = shownSeed(); seed >= 0) QApplication::clipboard()->setText(QString::number(seed));
  });

  auto* sendKey = new QShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return), this);
  sendKey->setContext(Qt::WidgetWithChildrenShortcut);
  auto* stopKey = new QShortcut(QKeySequence(Qt::Key_Escape), this);
  stopKey->setContext(Qt::WidgetWithChildrenShortcut);
  connect(sendKey, &QShortcut::activated, this, &ChatPanel::send);
  connect(stopKey, &QShortcut::activated, this, &ChatPanel::stop);
  connect(send_, &QPushButton::clicked, this, &ChatPanel::send);
  connect(stop_, &QPushButton::clicked, this, &ChatPanel::stop);
  connect(regenerate_, &QPushButton::clicked, this, &ChatPanel::regenerate);
  connect(edit_, &QPushButton::clicked, this, &ChatPanel::editLast);
  connect(cancelEdit_, &QPushButton::clicked, this, &ChatPanel::cancelEdit);
  connect(view_, &TokenView::messageActivated, this, &ChatPanel::editMessage);
  connect(showPrompt_, &QPushButton::clicked, this, &ChatPanel::showPrompt);
  connect(showReasoning_, &QCheckBox::toggled, this, [this] { rerender(); });
  connect(prevBranch_, &QPushButton::clicked, this, [this] { showBranch(-1); });
  connect(nextBranch_, &QPushButton::clicked, this, [this] { showBranch(1); });
  connect(color_, &QComboBox::currentIndexChanged, this, [this](int i) {
    view_->setColorMode(static_cast<ColorMode>(i));
    rerender();
  });
  connect(mode_, &QComboBox::currentIndexChanged, this, [this](int i) {
    conversation_.completionMode = i == 1;
    system_->setEnabled(i == 0);
  });
  connect(format_, &QComboBox::currentTextChanged, this, [this](const QString& f) { conversation_.format = f; });
  connect(system_, &QLineEdit::textChanged, this, [this](const QString& s) { conversation_.systemPrompt = s; });
  connect(view_, &TokenView::tokenClicked, this, &ChatPanel::tokenClicked);
  connect(model_, &SessionModel::batchApplied, this, &ChatPanel::onBatch);
  connect(model_, &SessionModel::cleared, this, &ChatPanel::rerender);
  connect(model_, &SessionModel::cleared, this, &ChatPanel::markEvictions);
  connect(model_, &SessionModel::restoredChanged, this, &ChatPanel::rerender);
  connect(model_, &SessionModel::tokenSelected, view_, &TokenView::setSelected);
}

void ChatPanel::setConversation(const Conversation& conversation) {
  // The rendered prompts belong to the turns' messages: another path (an edit
  // switched to in the Branches panel) has prompts of its own, not known here.
  auto messages = [](const Conversation& c) {
    QStringList out{c.systemPrompt};
    for (const Turn& t : c.turns) out << (t.role == QLatin1String("user") ? t.text : QString());
    return out;
  };
  if (messages(conversation) != messages(conversation_)) prompts_.clear();
  conversation_ = conversation;
  editing_ = kNotEditing;
  system_->setText(conversation.systemPrompt);
  mode_->setCurrentIndex(conversation.completionMode ? 1 : 0);
  format_->setCurrentText(conversation.format);
  rerender();
}

void ChatPanel::setFormat(const QString& format) { format_->setCurrentText(format); }
QString ChatPanel::format() const { return format_->currentText(); }
QString ChatPanel::warningText() const { return warning_->isVisible() ? warning_->text() : QString(); }
void ChatPanel::setShowReasoning(bool show) { showReasoning_->setChecked(show); }

const UiChatPrompt* ChatPanel::promptFor(quint64 tag) const {
  auto it = prompts_.constFind(tag);
  return it == prompts_.constEnd() ? nullptr : &it.value();
}

void ChatPanel::onChatPrompt(const UiChatPrompt& prompt) {
  prompts_.insert(prompt.tag, prompt);
  warning_->setText(prompt.warning.isEmpty() ? QString() : tr("Chat template: %1").arg(prompt.warning));
  warning_->setVisible(!prompt.warning.isEmpty());
  if (promptView_ && promptView_->isVisible()) promptView_->setPrompt(prompt);
  updateButtons();
}

void ChatPanel::showPrompt() {
  if (conversation_.turns.isEmpty()) return;
  const UiChatPrompt* p = promptFor(static_cast<quint64>(conversation_.turns.size() - 1));
  if (!p) return;
  if (!promptView_) {
    promptView_ = new PromptView(this);
    connect(promptView_, &PromptView::tokenPicked, this, [this](int position) {
      if (conversation_.turns.isEmpty()) return;
      if (const RequestKey r = conversation_.turns.back().currentRequest(); r != 0) emit promptTokenClicked(r, position);
    });
  }
  promptView_->setPrompt(*p);
  promptView_->show();
  promptView_->raise();
}

ReasoningRange findReasoning(const TokenSeq& tokens) {
  // Character offsets of each token in the answer text, then the markers' tokens.
  QString text;
  std::vector<int> starts;
  starts.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    starts.push_back(static_cast<int>(text.size()));
    text += tokens.text(i);
  }
  auto tokenAt = [&](int offset) {
    const auto it = std::upper_bound(starts.begin(), starts.end(), offset);
    return static_cast<int>(it - starts.begin()) - 1;
  };
  ReasoningRange r;
  const int open = static_cast<int>(text.indexOf(QLatin1String("<think>")));
  const int close = static_cast<int>(text.indexOf(QLatin1String("</think>"), std::max(open, 0)));
  if (open < 0 && close < 0) return r;
  r.begin = open < 0 ? 0 : tokenAt(open);  // no <think>: the template opened it in the prompt
  r.closed = close >= 0;
  r.end = r.closed ? tokenAt(close + 7) + 1 : static_cast<int>(tokens.size());
  return r;
}

void ChatPanel::appendToken(const UiToken& token) {
  if (TokenView::isForced(token) && forcedLegend_->isHidden()) forcedLegend_->setVisible(true);
  view_->appendToken(token);
}

void ChatPanel::appendAnswer(const TokenSeq& tokens) {
  const ReasoningRange r = findReasoning(tokens);
  for (int i = 0; i < static_cast<int>(tokens.size()); ++i) {
    if (i == r.begin && r.size() > 0) {
      if (!showReasoning_->isChecked()) {
        view_->appendNote(tr("\u25b8 reasoning: %1 tokens%2\n").arg(r.size()).arg(r.closed ? QString() : tr(" (thinking...)")));
        i = r.end - 1;
        continue;
      }
      view_->setReasoningStyle(true);
    }
    if (i == r.end) view_->setReasoningStyle(false);
    appendToken(tokens[static_cast<size_t>(i)]);
  }
  view_->setReasoningStyle(false);
}
void ChatPanel::setInputText(const QString& text) { input_->setPlainText(text); }
void ChatPanel::setMaxTokens(int maxTokens) { maxTokens_->setValue(maxTokens); }
int ChatPanel::maxTokens() const { return maxTokens_->value(); }

int ChatPanel::turnOf(RequestKey request) const {
  for (RequestKey key = request; key != 0;) {
    for (int i = 0; i < conversation_.turns.size(); ++i)
      if (conversation_.turns[i].branches.contains(key)) return i;
    const RequestInfo* r = model_->request(key);
    key = r && r->parent ? *r->parent : 0;
  }
  return -1;
}

TokenSeq ChatPanel::displayedTokens(RequestKey request) const {
  const RequestInfo* r = model_->request(request);
  if (!r) return {};
  TokenSeq out;
  // A fork at one of the parent's tokens continues its answer; a branch with a
  // prompt of its own (an edited message, a regenerated answer) starts afresh.
  if (r->parent && r->promptIds.size() == r->forkPosition) {
    if (const RequestInfo* p = model_->request(*r->parent)) {
      out = displayedTokens(*r->parent);
      // Parent's tokens at generated index < fork point stay; the rest is replaced.
      const int keep = r->forkPosition - static_cast<int>(p->promptIds.size());
      const int parentBase = static_cast<int>(out.size()) - static_cast<int>(p->tokens.size());
      out.truncate(static_cast<size_t>(std::clamp(parentBase + keep, 0, static_cast<int>(out.size()))));
    }
  }
  out.append(r->tokens, 0, r->tokens.size());
  return out;
}

QString ChatPanel::turnText(RequestKey request) const {
  QString text;
  const TokenSeq tokens = displayedTokens(request);
  for (size_t i = 0; i < tokens.size(); ++i) text += tokens.text(i);
  return text;
}

void ChatPanel::rerender() { rerenderFrom(0); }

QString ChatPanel::shownSystemPrompt() const {
  return conversation_.completionMode ? QString() : conversation_.systemPrompt;
}

void ChatPanel::rerenderFrom(int from) {
  // The turns before `from` stay as drawn only if a full redraw would draw
  // them the same way: same mode and system prompt above them, and a recorded
  // start (the view holds at least that much) for turn `from`.
  const int numDrawn = static_cast<int>(turnStarts_.size());
  const bool keepBefore = from > 0 && from <= numDrawn && from <= conversation_.turns.size() &&
                          drawnCompletionMode_ == conversation_.completionMode &&
                          drawnSystemPrompt_ == shownSystemPrompt() &&
                          (from == numDrawn || turnStarts_[static_cast<size_t>(from)] <= view_->transcriptLength());
  if (!keepBefore) {
    from = 0;
    view_->clearAll();
    forcedLegend_->setVisible(false);
    drawnCompletionMode_ = conversation_.completionMode;
    drawnSystemPrompt_ = shownSystemPrompt();
  } else if (from < numDrawn) {
    view_->truncateTo(turnStarts_[static_cast<size_t>(from)]);
  }
  turnStarts_.resize(static_cast<size_t>(from));
  if (renderedTurn_ >= from) {
    rendered_ = 0;
    renderedTokens_ = 0;
    renderedOwn_ = 0;
    renderedKnown_ = false;
    renderedReasoning_ = false;
    renderedTurn_ = -1;
  }
  view_->beginAppend();  // laid out once, not once per token
  if (from == 0 && !drawnSystemPrompt_.isEmpty()) {
    view_->appendLabel(tr("System"));
    view_->appendMessage(conversation_.systemPrompt, -1);
  }
  for (int i = from; i < conversation_.turns.size(); ++i) {
    turnStarts_.push_back(view_->transcriptLength());
    drawTurn(i);
  }
  view_->endAppend();
  if (auto sel = model_->selectedToken()) view_->setSelected(sel->first, sel->second);
  updateButtons();
}

void ChatPanel::drawTurn(int i) {
  const Turn& turn = conversation_.turns[i];
  const bool assistant = turn.role == QLatin1String("assistant");
  if (!conversation_.completionMode) view_->appendLabel(assistant ? tr("Assistant") : tr("User"));
  if (!assistant) {
    view_->appendMessage(turn.text, i);
    return;
  }
  const RequestKey key = turn.currentRequest();
  const TokenSeq tokens = displayedTokens(key);
  // A restored session knows an answer's text, not its tokens; a request
  // that is starting shows nothing yet (never the previous branch's text).
  if (tokens.empty() && !model_->request(key) && key != active_) view_->appendPlain(turn.text);
  appendAnswer(tokens);
  rendered_ = key;
  renderedTokens_ = static_cast<int>(tokens.size());
  const RequestInfo* r = model_->request(key);
  renderedOwn_ = r ? static_cast<int>(r->tokens.size()) : 0;
  renderedKnown_ = r != nullptr;
  renderedReasoning_ = findReasoning(tokens).size() > 0;
  renderedTurn_ = i;
}

bool ChatPanel::mayHaveReasoning(const RequestInfo& r) const {
  // Whole-answer scans per frame grow with the answer: only the new tokens (and
  // a marker's worth of text before them) are searched for a <think> marker.
  if (renderedReasoning_) return true;
  QString tail;
  const int from = std::max(0, renderedOwn_ - 8);
  for (size_t i = static_cast<size_t>(from); i < r.tokens.size(); ++i) tail += r.tokens.text(i);
  return tail.contains(QLatin1String("think>"));
}

// Tokens whose KV an eviction policy dropped are struck through
// (KvEvictionLog). They are painted over the text, so a repaint (no redraw of
// the transcript) shows new ones; while no request has evicted, the view has
// no lookup and its paint does no second pass over the spans.
void ChatPanel::markEvictions() {
  paintedEvictions_ = model_->evictionRevision();
  const bool any = !model_->evictionLogs().empty();
  if (any == evictionLookupSet_) return view_->viewport()->update();
  evictionLookupSet_ = any;
  if (!any) return view_->setEvictionLookup({}, {});
  view_->setEvictionLookup(
      [model = model_](RequestKey request, int index) { return model->tokenEviction(request, index).evicted(); },
      [model = model_](RequestKey request, int index) { return model->tokenEvictionText(request, index); });
}

void ChatPanel::onBatch() {
  if (model_->evictionRevision() != paintedEvictions_) markEvictions();
  bool finishedActive = false;
  if (active_ != 0) {
    const RequestInfo* r = model_->request(active_);
    finishedActive = r && r->finished;
  }
  // Fast path: new tokens of the request at the end of the view are appended.
  const bool atEnd = !conversation_.turns.isEmpty() && conversation_.turns.back().currentRequest() == rendered_ &&
                     rendered_ != 0;
  if (atEnd) {
    // Only the newest tokens are appended; the request's earlier tokens (and any
    // fork ancestry) are already in the view.
    const RequestInfo* r = model_->request(rendered_);
    const int own = r ? static_cast<int>(r->tokens.size()) : 0;
    // A request rendered before its first events arrived showed the turn's old
    // text: draw it once properly (with a branch's ancestry), then append.
    // Reasoning is folded (or restyled) as a whole: redraw while an answer has it.
    if (r && (!renderedKnown_ || mayHaveReasoning(*r))) {
      rerenderFrom(static_cast<int>(conversation_.turns.size()) - 1);
    } else if (r && own >= renderedOwn_) {
      view_->beginAppend();  // the batch's tokens are laid out once
      for (int i = renderedOwn_; i < own; ++i) appendToken(r->tokens[static_cast<size_t>(i)]);
      view_->endAppend();
      renderedTokens_ += own - renderedOwn_;
      renderedOwn_ = own;
      view_->ensureCursorVisible();
    } else {
      rerenderFrom(static_cast<int>(conversation_.turns.size()) - 1);  // the tokens at the end changed
    }
  } else if (!conversation_.turns.isEmpty() && conversation_.turns.back().currentRequest() != 0) {
    rerender();
  }
  if (finishedActive) {
    const RequestInfo* r = model_->request(active_);
    const int turn = turnOf(active_);
    if (turn >= 0) conversation_.turns[turn].text = turnText(active_);
    const ReasoningRange reasoning = findReasoning(displayedTokens(active_));
    if (r->finish.reason == QLatin1String("error"))
      status_->setText(tr("Error: %1").arg(r->error.isEmpty() ? tr("the request failed") : r->error));
    else
      status_->setText(tr("%1 tokens%6, %2, seed %3 (TTFT %4 ms, %5 ms/token)")
                           .arg(r->finish.numGenerated)
                           .arg(r->finish.reason)
                           .arg(r->seed)
                           .arg(r->finish.ttftMs, 0, 'f', 1)
                           .arg(r->finish.tpotMs, 0, 'f', 2)
                           .arg(reasoning.size() > 0 ? tr(" (%1 reasoning, %2 answer)")
                                                           .arg(reasoning.size())
                                                           .arg(r->finish.numGenerated - reasoning.size())
                                                     : QString()));
    active_ = 0;
    emit conversationChanged();
  }
  updateButtons();
}

void ChatPanel::updateButtons() {
  // Busy from the click on: a second click cannot send twice.
  const bool busy = active_ != 0 || pending_;
  send_->setEnabled(!busy);
  stop_->setEnabled(active_ != 0);  // something to stop only once the engine has it
  const bool hasAnswer = !conversation_.turns.isEmpty() && conversation_.turns.back().role == QLatin1String("assistant");
  regenerate_->setEnabled(!busy && hasAnswer);
  edit_->setEnabled(!busy && conversation_.turns.size() >= 2);
  cancelEdit_->setVisible(editing_ != kNotEditing);
  showPrompt_->setEnabled(!conversation_.turns.isEmpty() &&
                          promptFor(static_cast<quint64>(conversation_.turns.size() - 1)) != nullptr);
  int n = 0, cur = 0;
  if (hasAnswer) {
    n = static_cast<int>(conversation_.turns.back().branches.size());
    cur = conversation_.turns.back().current;
  }
  const qint64 seed = shownSeed();
  const QString seedText = seed >= 0 ? tr("seed %1").arg(seed) : QString();
  branchLabel_->setText(n > 1 ? QStringLiteral("%1/%2 \u00b7 %3").arg(cur + 1).arg(n).arg(seedText) : seedText);
  prevBranch_->setVisible(n > 1);
  nextBranch_->setVisible(n > 1);
  prevBranch_->setEnabled(cur > 0);
  nextBranch_->setEnabled(cur + 1 < n);
  branchLabel_->setVisible(n > 0);
  copySeed_->setVisible(seed >= 0);
}

qint64 ChatPanel::shownSeed() const {
  if (conversation_.turns.isEmpty()) return -1;
  const RequestInfo* r = model_->request(conversation_.turns.back().currentRequest());
  return r ? r->seed : -1;
}

void ChatPanel::submitTurn(int assistantTurn, const QVector<quint64>& branchFrom, bool regenerate) {
  status_->setText(tr("generating..."));
  pending_ = true;
  updateButtons();
  TurnCommand turn;
  turn.tag = static_cast<quint64>(assistantTurn);
  turn.maxTokens = maxTokens_->value();
  turn.branchFrom = branchFrom;
  turn.regenerate = regenerate;
  if (conversation_.completionMode) {
    // Notebook mode: the text continues as written (BOS is added by the engine).
    for (const UiChatMessage& m : conversation_.messagesBefore(assistantTurn)) turn.prompt += m.text;
  } else {
    prompts_.remove(turn.tag);
    turn.chat = true;
    turn.messages = conversation_.messagesBefore(assistantTurn);
    turn.format = format();
  }
  emit generate(turn);
}

void ChatPanel::send() {
  if (active_ != 0 || pending_) return;
  const QString text = input_->toPlainText();
  if (editing_ != kNotEditing) {
    // The old path's requests are the candidates the engine branches from.
    const QVector<quint64> from = conversation_.requestsOfPath();
    const int edited = std::exchange(editing_, kNotEditing);
    const int assistant = conversation_.editMessage(edited, text);
    if (assistant < 0) {
      if (edited == -1) system_->setText(text);  // no message yet: nothing to branch
      input_->clear();
      rerender();
      return;
    }
    input_->clear();
    system_->setText(conversation_.systemPrompt);
    prompts_.clear();  // tags (turn indices) of the old path
    rerenderFrom(edited < 0 ? 0 : edited);
    submitTurn(assistant, from);
    emit conversationChanged();
    return;
  }
  if (text.isEmpty() && conversation_.turns.isEmpty()) return;
  conversation_.turns.push_back({QStringLiteral("user"), text, {}, 0});
  conversation_.turns.push_back({QStringLiteral("assistant"), QString(), {}, 0});
  input_->clear();
  rerenderFrom(static_cast<int>(conversation_.turns.size()) - 2);
  submitTurn(static_cast<int>(conversation_.turns.size()) - 1);
  emit conversationChanged();
}

void ChatPanel::stop() {
  if (active_ != 0) emit stopRequested(active_);
}

void ChatPanel::regenerate() {
  if (active_ != 0 || pending_ || conversation_.turns.isEmpty() ||
      conversation_.turns.back().role != QLatin1String("assistant"))
    return;
  const Turn& turn = conversation_.turns.back();
  QVector<quint64> from;  // the shown answer first: the new one branches from it
  if (turn.currentRequest() != 0) from.push_back(turn.currentRequest());
  for (RequestKey k : turn.branches)
    if (!from.contains(k)) from.push_back(k);
  submitTurn(static_cast<int>(conversation_.turns.size()) - 1, from, /*regenerate=*/true);
}

void ChatPanel::editLast() {
  for (int i = static_cast<int>(conversation_.turns.size()) - 1; i >= 0; --i)
    if (conversation_.turns[i].role == QLatin1String("user")) return editMessage(i);
}

void ChatPanel::editMessage(int turn) {
  if (active_ != 0 || pending_) return;
  const bool system = turn == -1;
  if (system ? conversation_.completionMode
             : (turn < 0 || turn >= conversation_.turns.size() || conversation_.turns[turn].role != QLatin1String("user")))
    return;
  editing_ = turn;
  input_->setPlainText(system ? conversation_.systemPrompt : conversation_.turns[turn].text);
  input_->setFocus();
  status_->setText(system ? tr("Editing the system prompt: Send starts a new branch from the first message")
                          : tr("Editing message %1: Send starts a new branch; the old one stays in the Branches panel")
                                .arg(turn / 2 + 1));
  updateButtons();
}

void ChatPanel::cancelEdit() {
  editing_ = kNotEditing;
  input_->clear();
  status_->clear();
  updateButtons();
}

void ChatPanel::setCompletionMode(bool completion) { mode_->setCurrentIndex(completion ? 1 : 0); }
bool ChatPanel::completionMode() const { return conversation_.completionMode; }

bool ChatPanel::hasBranches() const {
  if (!conversation_.otherPaths.isEmpty()) return true;
  for (const Turn& t : conversation_.turns)
    if (t.branches.size() > 1) return true;
  return false;
}

void ChatPanel::clearConversation() {
  conversation_.turns.clear();
  conversation_.otherPaths.clear();
  editing_ = kNotEditing;
  prompts_.clear();
  warning_->setVisible(false);
  active_ = 0;
  pending_ = false;
  status_->clear();
  rerender();
  emit conversationChanged();
}

void ChatPanel::onRequestSubmitted(quint64 tag, quint64 request) {
  pending_ = false;
  if (tag >= static_cast<quint64>(conversation_.turns.size())) {
    updateButtons();
    return;
  }
  Turn& turn = conversation_.turns[static_cast<int>(tag)];
  turn.branches.push_back(request);
  turn.current = static_cast<int>(turn.branches.size()) - 1;
  active_ = request;
  rerenderFrom(static_cast<int>(tag));
  emit conversationChanged();
}

void ChatPanel::onRequestFailed(quint64 tag, const QString& message) {
  Q_UNUSED(tag);
  status_->setText(tr("Error: %1").arg(message));
  active_ = 0;
  pending_ = false;
  updateButtons();
}

void ChatPanel::showBranch(int delta) {
  if (conversation_.turns.isEmpty()) return;
  Turn& turn = conversation_.turns.back();
  if (turn.branches.isEmpty()) return;
  turn.current = std::clamp(turn.current + delta, 0, static_cast<int>(turn.branches.size()) - 1);
  turn.text = turnText(turn.currentRequest());
  rerenderFrom(static_cast<int>(conversation_.turns.size()) - 1);
  emit conversationChanged();
}

}  // namespace gbui
